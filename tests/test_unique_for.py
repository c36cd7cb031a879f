"""``@task(unique_for=seconds)`` (issue 29, item 5): after a run of an id succeeded, a new
enqueue of that id is refused for the window; a queued or running copy dedups as before.
On a real server and a real cluster (``real``)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import transaction
from django.test import override_settings

from django_redislock import queues, task
from django_redislock.exceptions import InvalidArgument
from django_redislock.queue import Queue
from django_redislock.queue.worker import Worker

from . import unique_tasks as ut
from .conftest import RedisTarget
from .testapp import tasks

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def alias(real: RedisTarget) -> Iterator[RedisTarget]:
    options = {"RETRY_BACKOFF": 0.01, "RETRY_JITTER": False, "SOCKET_TIMEOUT": 3.0}
    params = {**real.params(**options), "KEY_PREFIX": "uniq"}
    with override_settings(REDISLOCK_QUEUES={"default": params}):
        uniq().purge()
        client().delete(uniq().unique_key)
        client().delete(tasks.RUNS_KEY)
        yield real


def uniq() -> Queue:
    found: Queue = queues["default"].queue("uniq")
    return found


def client() -> Any:
    return queues["default"].client  # type: ignore[attr-defined]


def drain(pool: str = "solo") -> None:
    for _ in range(50):
        Worker([uniq()], burst=True, timeout=30, pool=pool).run()
        stats = uniq().stats()
        if not stats["ready"] + stats["delayed"] + stats["in_flight"]:
            return
        time.sleep(0.02)
    raise AssertionError("the queue was not drained in 50 rounds")


@pytest.mark.parametrize("pool", ["solo", "thread", "async"])
def test_a_second_call_within_the_window_after_success_is_refused(
    alias: RedisTarget, pool: str
) -> None:
    first = ut.report.delay("2026-11-29")
    assert first.queued is True and first.refused is None
    drain(pool)
    again = ut.report.delay("2026-11-29")
    assert str(again) == str(first)  # the id is derived from the arguments
    assert again.queued is False
    assert again.refused is not None and str(first) in again.refused
    assert "unique_for" in again.refused
    assert uniq().get(again) is None  # nothing was written
    other = ut.report.delay("2026-11-30")  # another call: another id, queued
    assert other.queued is True
    drain(pool)
    assert tasks.runs() == ["report:2026-11-29", "report:2026-11-30"]


def test_a_queued_or_running_copy_is_kept_and_says_so(alias: RedisTarget) -> None:
    first = ut.report.delay("queued")
    kept = ut.report.delay("queued")
    assert kept.queued is False and kept.refused is not None
    assert "already queued or running" in kept.refused and str(first) in kept.refused
    [claimed] = uniq().claim(1).tasks  # now in flight, not acked
    running = ut.report.delay("queued")
    assert running.queued is False and "already queued or running" in str(running.refused)
    claimed.unique_for = ut.report.unique_for  # what a worker sets before the run
    assert uniq().ack(claimed) == 1
    done = ut.report.delay("queued")
    assert done.queued is False and "unique_for" in str(done.refused)


def test_the_window_is_opened_by_the_ack_a_claim_carries(alias: RedisTarget) -> None:
    first = ut.report.delay("piggyback")
    [claimed] = uniq().claim(1).tasks
    claimed.unique_for = 3600.0
    assert uniq().claim(1, ack=[claimed]).acked == 1
    assert ut.report.delay("piggyback").queued is False
    window = client().zscore(uniq().unique_key, str(first))
    assert window is not None


def test_the_window_closes_and_its_key_expires_by_itself(alias: RedisTarget) -> None:
    first = ut.ping.delay("short")
    drain()
    ttl = client().pttl(uniq().unique_key)
    assert 0 < ttl <= 2000  # the key lives as long as its longest window, no longer
    refused = 0
    deadline = time.monotonic() + 30
    while True:  # refused until the window ends, then queued again
        again = ut.ping.delay("short")
        if again.queued:
            break
        refused += 1
        assert time.monotonic() < deadline, "the 2 s window never closed"
        time.sleep(0.05)
    assert refused >= 1 and str(again) == str(first)
    assert client().exists(uniq().unique_key) == 0  # expired by itself
    drain()
    assert tasks.runs() == ["ping:short", "ping:short"]


def test_a_failed_run_opens_no_window(alias: RedisTarget) -> None:
    first = ut.fails.delay("boom")
    drain()
    dead = uniq().get(first)
    assert dead is not None and dead.state == "dead"
    again = ut.fails.delay("boom")  # back from the dead letters
    assert again.queued is True
    assert uniq().get(again).state == "ready"  # type: ignore[union-attr]


def test_a_stored_result_task_is_refused_the_same(alias: RedisTarget) -> None:
    first = ut.stored.delay("kept")
    drain()
    assert first.result(timeout=10) == "KEPT"
    again = ut.stored.delay("kept")
    assert again.queued is False and "unique_for" in str(again.refused)
    assert again.result(timeout=10) == "KEPT"  # the first run's result is left alone


def test_enqueue_many_and_an_explicit_id_are_refused_too(alias: RedisTarget) -> None:
    ut.report.enqueue(["x"], id="daily-x")
    ut.report.delay("y")
    drain()
    assert ut.report.enqueue(["x"], id="daily-x").queued is False
    assert ut.report.enqueue(["x"], id="daily-x", replace=True).queued is False
    handles = ut.report.enqueue_many([(["y"], {}), (["z"], {})])
    assert [h.queued for h in handles] == [False, True]
    assert "unique_for" in str(handles[0].refused)


def test_inside_a_transaction_and_from_async_code_the_answer_comes_the_same(
    alias: RedisTarget,
) -> None:
    with transaction.atomic():
        first = ut.report.delay("tx")
        assert first.queued is None  # sent by the commit
    assert first.queued is True
    drain()
    with transaction.atomic():
        again = ut.report.delay("tx")
    assert again.queued is False and "unique_for" in str(again.refused)
    late = asyncio.run(ut.report.delay_async("tx"))
    assert late.queued is False and "unique_for" in str(late.refused)
    assert tasks.runs() == ["report:tx"]


def test_a_plain_enqueue_of_the_id_does_not_check_the_window(alias: RedisTarget) -> None:
    first = ut.report.delay("plain")
    drain()
    assert uniq().enqueue(str(first), {"task": ut.report.path, "args": ["plain"]}) is True


def test_unique_for_is_checked_when_declared() -> None:
    with pytest.raises(InvalidArgument, match="unique_for"):
        task(queue="uniq", unique_for=0)(lambda: None)
    assert task(queue="uniq", unique_for=2)(lambda: None).unique is True
