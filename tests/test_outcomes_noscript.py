"""The worker's outcome batch on a server that forgot the scripts (SCRIPT FLUSH).

Counters, rate buckets and history endings go out together once a second; the
rate and history calls are ``EVALSHA``. A server that answers them ``NOSCRIPT``
gets exactly those calls again: the counters beside them are applied once.
"""

from __future__ import annotations

import os
import socket
import time
from typing import Any

import pytest
import redis

from django_redislock import task
from django_redislock.calls.batch import Batch
from django_redislock.calls.script import Script
from django_redislock.exceptions import ConnectionFailed
from django_redislock.queue import Queue, fnstats, runlog
from django_redislock.queue import outcomes as outcomes_module
from django_redislock.queue.fnstats import Tally, bin_of
from django_redislock.queue.history import read as read_history
from django_redislock.queue.rates import read as read_rates
from django_redislock.queue.worker import Worker, counters_key

from .conftest import RedisTarget
from .test_calls import primaries

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.parametrize("kind", ["single", "cluster"]),
]


@pytest.fixture
def target(kind: str, request: pytest.FixtureRequest) -> RedisTarget:
    found: RedisTarget = request.getfixturevalue(f"{kind}_target")
    return found


def command_calls(target: RedisTarget, name: str) -> int:
    return sum(
        int(server.info("commandstats").get(f"cmdstat_{name}", {"calls": 0})["calls"])
        for server in primaries(target)
    )


class Declined(Exception):
    """The failure of :func:`declined`."""


@task(queue="outcomes-a", name="tests.outcomes_noscript.fine")
def fine(n: int) -> int:
    return n


@task(queue="outcomes-a", name="tests.outcomes_noscript.declined", max_attempts=5)
def declined(n: int) -> None:
    raise Declined(f"order {n} declined")


def fill(queue: Queue, failing: bool) -> None:
    # a task that failed once: its successful run ends its history
    queue.enqueue("again", fine.payload([0], None))
    (first,) = queue.pop(1)
    assert queue.retry(first, delay=0, error="boom") == "retried"
    queue.enqueue_many([(f"t{i}", fine.payload([i], None)) for i in range(7)])
    if failing:
        queue.enqueue("declined", declined.payload([1], None))


def test_a_flushed_script_cache_records_every_outcome_once(
    target: RedisTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = target.queue_backend(RETRY_BACKOFF=60, RETRY_JITTER=False)
    # two queues: the counters of the second follow the first's script calls in the batch
    first, second = backend.queue("outcomes-a"), backend.queue("outcomes-b")
    fill(first, failing=True)
    fill(second, failing=False)
    monkeypatch.setattr(outcomes_module, "COUNTER_INTERVAL", 3600.0)  # one flush, at the end
    flushes: list[int] = []
    original = Worker._flush_counters

    def flush_scripts_first(worker: Worker, force: bool = False) -> None:
        if force:
            for server in primaries(target):
                server.script_flush()
            flushes.append(command_calls(target, "eval"))
        original(worker, force)
        if force:
            flushes[-1] = command_calls(target, "eval") - flushes[-1]

    monkeypatch.setattr(Worker, "_flush_counters", flush_scripts_first)
    summary = Worker([first, second], burst=True).run()
    assert (summary.succeeded, summary.retried) == (16, 1)
    assert flushes == [0]  # one flush, and no EVAL in it: the scripts went as EVALSHA

    for queue, failed in ((first, 1), (second, 0)):
        counters = {k.decode(): int(v) for k, v in target.raw.hgetall(counters_key(queue)).items()}
        expected = {"succeeded": 8} | ({"failed": 1, "retried": 1} if failed else {})
        assert counters == expected
        rates = read_rates(queue)
        assert rates.total("succeeded") == 8 and rates.total("retried") == failed
        assert dict(rates.types) == ({f"{__name__}.Declined": 1} if failed else {})
        runs = read_history(queue, "again")
        assert [(r.attempt, r.outcome) for r in runs] == [(1, "retried"), (2, "succeeded")]
        assert runs[1].worker == f"{socket.gethostname()}:{os.getpid()}"


def test_a_failed_resend_drops_the_counts_that_were_applied(
    target: RedisTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Redis goes away between the send and the resend: the counters are not sent again."""
    backend = target.queue_backend()
    queue = backend.queue("outcomes-lost")
    worker = Worker([queue], burst=True)
    worker._counts[queue.name].update(succeeded=3, failed=1, retried=1)
    worker._types[queue.name].update(KeyError=1)
    for server in primaries(target):
        server.script_flush()

    def unreachable(self: Any, client: Any) -> None:
        raise redis.ConnectionError("gone between the send and the resend")

    with monkeypatch.context() as patch:
        patch.setattr(Script, "load", unreachable)
        with pytest.raises(ConnectionFailed):
            worker._flush_counters(force=True)
    assert not worker._counts[queue.name] and not worker._types[queue.name]
    worker._flush_counters(force=True)  # nothing left to send
    counters = {k.decode(): int(v) for k, v in target.raw.hgetall(counters_key(queue)).items()}
    assert counters == {"succeeded": 3, "failed": 1, "retried": 1}
    assert read_rates(queue).total("succeeded") == 0  # the rates call never ran: lost


def test_a_batch_that_was_not_sent_keeps_its_counts(
    target: RedisTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = target.queue_backend()
    queue = backend.queue("outcomes-kept")
    worker = Worker([queue], burst=True)
    worker._counts[queue.name].update(succeeded=2)
    run = ("a", 2, 0.5, "shop.tasks.a", True, time.monotonic())
    worker._runs[queue.name].append(run)
    worker._fns[queue.name]["shop.tasks.a"] = Tally(runs=3, failed=1, bins={bin_of(0.5): 3})

    def unreachable(self: Any, positions: list[int]) -> list[Any]:
        raise redis.ConnectionError("Redis is away")

    with monkeypatch.context() as patch:
        patch.setattr(Batch, "_send", unreachable)
        with pytest.raises(ConnectionFailed):
            worker._flush_counters(force=True)
    assert worker._counts[queue.name] == {"succeeded": 2}
    assert worker._runs[queue.name] == [run]
    assert worker._fns[queue.name]["shop.tasks.a"].runs == 3
    worker._flush_counters(force=True)
    assert target.raw.hget(counters_key(queue), "succeeded") == b"2"
    assert [(r.attempt, r.outcome, r.function) for r in read_history(queue, "a")] == [
        (2, "succeeded", "shop.tasks.a")
    ]
    assert [(r.id, r.outcome, r.runtime) for r in runlog.read(queue).runs] == [
        ("a", "succeeded", 0.5)
    ]
    (stats,) = fnstats.read(queue)
    assert (stats.name, stats.hour.runs, stats.hour.failed, stats.hour.timed) == (
        "shop.tasks.a",
        3,
        1,
        3,
    )
