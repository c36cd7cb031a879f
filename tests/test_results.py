"""Results of ``@task(store_result=True)``: the handle, statuses, reused ids, eager mode, bad input.

Contract tests: each runs on fakeredis, a real server and a real cluster. Waiting on
the real servers is in ``test_results_wait.py``.
"""

from __future__ import annotations

import asyncio
import pickle
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.db import transaction
from django.test import override_settings

from django_redislock import queues, task
from django_redislock.exceptions import (
    InvalidArgument,
    MissingDependency,
    ResultTimeout,
    ResultUnknown,
    TaskFailed,
    UndecodablePayload,
)
from django_redislock.periodic.scheduler import Scheduler
from django_redislock.periodic.schedules import SECOND, schedule, tick_label
from django_redislock.queue import Queue
from django_redislock.queue import results as results_module
from django_redislock.queue.registry import Enqueued
from django_redislock.queue.results import (
    ResultStatus,
    record_keys,
    store_failure_async,
    store_success,
    store_success_async,
)
from django_redislock.queue.worker import Worker

from . import result_tasks as rt
from .conftest import RedisTarget

FIVE_MINUTES = 300 * SECOND

# the worker closes stale database connections between tasks, as around a request
pytestmark = pytest.mark.django_db(transaction=True)


def use(target: RedisTarget, **options: Any) -> Iterator[RedisTarget]:
    params = {**target.params(**options), "KEY_PREFIX": "test"}
    with override_settings(REDISLOCK_QUEUES={"default": params}):
        yield target


@pytest.fixture
def alias(redis_target: RedisTarget) -> Iterator[RedisTarget]:
    yield from use(redis_target)


def results_queue() -> Queue:
    found: Queue = queues["default"].queue("results")
    return found


def drain() -> None:
    Worker([results_queue()], burst=True).run()


def keys_of(target: RedisTarget) -> set[bytes]:
    client: Any = target.raw
    if target.kind == "cluster":
        return set(client.keys(target_nodes=client.ALL_NODES))
    return set(client.keys())


def eventually(condition: Callable[[], bool], seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {seconds}s waiting for {what}")
        time.sleep(0.02)


# -- the handle and its statuses ------------------------------------------------------------


def test_delay_returns_a_handle_that_is_still_the_id(alias: RedisTarget) -> None:
    handle = rt.add.delay(2, 3)
    assert isinstance(handle, str) and len(handle) == 32 and handle.queued is True
    assert handle.task_id == str(handle)
    assert handle.status is ResultStatus.READY
    [queued] = results_queue().top()
    assert queued.id == handle and queued.payload["args"] == [2, 3]
    assert set(queued.payload["result"]) == {"gen", "ttl"}


def test_a_stored_value_is_read_back(alias: RedisTarget) -> None:
    handle = rt.add.delay(2, 3)
    drain()
    assert handle.status is ResultStatus.SUCCESSFUL
    assert handle.result(timeout=1) == 5
    assert handle.result() == 5  # final: no wait at all
    assert rt.add.result_of(str(handle)).result(timeout=0) == 5


def test_status_follows_the_queue_before_there_is_an_outcome(alias: RedisTarget) -> None:
    handle = rt.add.delay(1, 1)
    queue = results_queue()
    [claimed] = queue.pop()
    assert handle.status is ResultStatus.RUNNING
    queue.retry(claimed, delay=60, error="ValueError: not yet")
    assert str(handle.status) == "READY"
    with pytest.raises(ResultTimeout, match="still READY; last error: ValueError: not yet"):
        handle.result(timeout=0)


def test_a_dead_task_raises_task_failed_with_its_error(alias: RedisTarget) -> None:
    handle = rt.explode.delay("boom")
    drain()
    assert handle.status is ResultStatus.FAILED
    with pytest.raises(TaskFailed, match="ValueError: exploded: boom") as failed:
        handle.result(timeout=1)
    assert failed.value.task_id == handle
    assert failed.value.error.startswith("ValueError: exploded: boom")
    assert "Traceback" in failed.value.error


def test_a_payload_naming_no_task_stores_its_failure(alias: RedisTarget) -> None:
    queue = results_queue()
    marker = {"gen": "f00d", "ttl": 60}
    queue.enqueue("orphan", {"task": "tests.result_tasks.gone", "args": [], "result": marker})
    drain()
    with pytest.raises(TaskFailed, match="TaskNotRegistered: no @task is registered"):
        rt.add.result_of("orphan").result(timeout=1)
    assert alias.raw.hget(record_keys(queue, "orphan")[0], "gen") == b"f00d"


def test_a_value_that_cannot_be_stored_is_an_error_result(alias: RedisTarget) -> None:
    handle = rt.unencodable.delay()
    after = rt.add.delay(1, 2)
    drain()  # the worker goes on
    with pytest.raises(TaskFailed, match="the return value cannot be stored"):
        handle.result(timeout=1)
    assert after.result(timeout=1) == 3
    assert results_queue().stats()["dead"] == 0  # the task itself succeeded


def test_an_expired_result_is_unknown(alias: RedisTarget) -> None:
    handle = rt.short_lived.delay("soon gone")
    drain()
    assert handle.result(timeout=1) == "soon gone"
    eventually(lambda: handle.status is ResultStatus.UNKNOWN, 15, "the result to expire")
    with pytest.raises(ResultUnknown, match="expired"):
        handle.result(timeout=5)
    assert record_keys(results_queue(), handle)[0].encode() not in keys_of(alias)


def test_a_task_without_store_result_writes_no_result(alias: RedisTarget) -> None:
    handle = rt.forgetful.delay("x")
    [queued] = results_queue().top()
    assert "result" not in queued.payload
    before = keys_of(alias)
    drain()
    assert not any(b":result:" in key or b":done:" in key for key in keys_of(alias) | before)
    assert handle.status is ResultStatus.UNKNOWN  # ran and acked: nothing is known


def test_the_alias_options_are_the_defaults(redis_target: RedisTarget) -> None:
    for _ in use(redis_target, STORE_RESULTS=True, RESULT_TTL=123.0):
        handle = rt.forgetful.delay("kept")  # store_result not given: the alias says yes
        [queued] = results_queue().top()
        assert queued.payload["result"]["ttl"] == 123.0
        drain()
        assert handle.result(timeout=1) == "kept"
        assert 0 < redis_target.raw.pttl(record_keys(results_queue(), handle)[0]) <= 123_000


def test_many_calls_get_handles(alias: RedisTarget) -> None:
    handles = rt.add.enqueue_many([((i, i), {}) for i in range(5)], batch_size=2)
    assert [h.queued for h in handles] == [True] * 5
    drain()
    assert [h.result(timeout=1) for h in handles] == [0, 2, 4, 6, 8]


def test_inside_a_transaction_the_call_is_sent_at_the_commit(alias: RedisTarget) -> None:
    with transaction.atomic():
        handle = rt.add.delay(4, 4)
        assert handle.queued is None
        assert handle.status is ResultStatus.UNKNOWN  # nothing is sent before the commit
    assert handle.queued is True and handle.status is ResultStatus.READY
    drain()
    assert handle.result(timeout=1) == 8


# -- reused ids ------------------------------------------------------------------------------


def test_a_new_run_of_a_reused_id_never_shows_the_last_result(alias: RedisTarget) -> None:
    first = rt.add.enqueue(args=[1, 1], id="sum")
    drain()
    assert first.result(timeout=1) == 2
    second = rt.add.enqueue(args=[20, 20], id="sum")
    assert second.queued is True
    assert second.status is ResultStatus.READY
    with pytest.raises(ResultTimeout):
        second.result(timeout=0.2)
    drain()
    assert second.result(timeout=1) == 40


def test_a_deduplicated_call_follows_the_kept_copy(alias: RedisTarget) -> None:
    kept = rt.add.enqueue(args=[1, 2], id="dup")
    again = rt.add.enqueue(args=[5, 5], id="dup")
    assert (kept.queued, again.queued) == (True, False)
    drain()
    assert kept.result(timeout=1) == again.result(timeout=1) == 3


def test_the_async_store_hooks_for_a_worker_on_an_event_loop(alias: RedisTarget) -> None:
    good, bad = rt.add.delay(1, 1), rt.explode.delay("async")
    queue = results_queue()
    claimed = {task.id: task for task in queue.pop(2)}

    async def finish() -> None:
        await store_success_async(queue, claimed[good], 2)
        await store_failure_async(queue, claimed[bad], ValueError("exploded: async"))

    asyncio.run(finish())
    assert good.result(timeout=0) == 2
    with pytest.raises(TaskFailed, match="ValueError: exploded: async"):
        bad.result(timeout=0)


def test_a_replaced_run_cannot_store_over_its_replacement(alias: RedisTarget) -> None:
    rt.add.enqueue(args=[1, 1], id="swap")
    queue = results_queue()
    [old_run] = queue.pop()
    replacement = rt.add.enqueue(args=[2, 2], id="swap", replace=True)
    store_success(queue, old_run, 2)  # the old run finishes late
    assert replacement.status is ResultStatus.READY
    drain()
    assert replacement.result(timeout=1) == 4


def test_a_requeued_dead_task_stores_its_new_outcome(alias: RedisTarget) -> None:
    handle = rt.explode.enqueue(args=["x"], id="phoenix")
    drain()
    assert handle.status is ResultStatus.FAILED
    assert results_queue().requeue_dead(["phoenix"]) == 1
    # the stored FAILED stays until the new run stores its own outcome
    assert handle.status is ResultStatus.FAILED


def test_a_periodic_tick_of_a_task_that_stores_results_stores_it(
    redis_target: RedisTarget,
) -> None:
    params = {**redis_target.params(), "KEY_PREFIX": "test"}
    every = schedule("keeper", rt.keep.path, every=timedelta(minutes=5), args=["tick"])
    with override_settings(
        REDISLOCK_QUEUES={"default": params}, REDISLOCK_LOCKS={"default": params}
    ):
        scheduler = Scheduler([every], clock=lambda: FIVE_MINUTES * 1000 + 1)
        scheduler.tick()
        tick = rt.keep.result_of(f"periodic:keeper:{tick_label(FIVE_MINUTES * 1000)}")
        assert tick.status is ResultStatus.READY
        drain()
        assert tick.result(timeout=1) == "tick"


# -- eager mode ------------------------------------------------------------------------------


def test_eager_mode_returns_a_known_result(redis_target: RedisTarget) -> None:
    for _ in use(redis_target, EAGER=True):
        handle = rt.add.delay(3, 4)
        before = keys_of(redis_target)
        assert handle.status is ResultStatus.SUCCESSFUL and handle.result() == 7
        with pytest.raises(TaskFailed, match="cannot be stored"):
            rt.unencodable.delay().result()
        with pytest.raises(ValueError, match="exploded"):  # as before: the caller sees it
            rt.explode.delay("now")
        assert rt.forgetful.delay("x").status is ResultStatus.UNKNOWN
        assert keys_of(redis_target) == before == set()


# -- bad input -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"store_result": "yes"}, "store_result must be True or False"),
        ({"store_result": 1}, "store_result must be True or False"),
        ({"result_ttl": 0}, "result_ttl must be > 0"),
        ({"result_ttl": -5}, "result_ttl must be > 0"),
        ({"result_ttl": "1h"}, "result_ttl must be a number of seconds"),
        ({"result_ttl": float("inf")}, "result_ttl must be > 0"),
    ],
)
def test_bad_options_name_the_argument(options: dict[str, Any], named: str) -> None:
    with pytest.raises(InvalidArgument, match=named):

        @task(queue="results", **options)
        def never_registered() -> None: ...


def test_a_bad_timeout_is_refused_before_any_wait(alias: RedisTarget) -> None:
    handle = rt.add.delay(1, 2)
    for bad in (-1, float("nan"), "5"):
        with pytest.raises(InvalidArgument, match="timeout must be"):
            handle.result(timeout=bad)  # type: ignore[arg-type]
    for bad_id in ("", 7, "x" * 513):
        with pytest.raises(InvalidArgument, match="id must be"):
            rt.add.result_of(bad_id)  # type: ignore[arg-type]


def test_a_malformed_marker_is_ignored_by_the_worker(alias: RedisTarget) -> None:
    queue = results_queue()
    payload = {"task": rt.add.path, "args": [1, 2], "kwargs": {}, "result": {"gen": 5}}
    queue.enqueue("hand-made", payload)
    drain()
    assert queue.stats()["in_flight"] == 0 and queue.stats()["dead"] == 0
    assert rt.add.result_of("hand-made").status is ResultStatus.UNKNOWN


def test_a_stored_value_that_cannot_be_decoded_fails_only_result(alias: RedisTarget) -> None:
    handle = rt.add.delay(1, 1)
    drain()
    alias.raw.hset(record_keys(results_queue(), handle)[0], "value", b"\x80 not json")
    assert handle.status is ResultStatus.SUCCESSFUL
    with pytest.raises(UndecodablePayload, match=f"stored result of task '{handle}'"):
        handle.result(timeout=1)


def test_a_handle_pickles_and_still_finds_its_result(alias: RedisTarget) -> None:
    handle = pickle.loads(pickle.dumps(rt.add.delay(6, 7)))
    assert isinstance(handle, Enqueued) and handle.queued is True
    drain()
    assert handle.result(timeout=1) == 13


def test_an_old_redis_py_on_a_cluster_is_named(
    cluster_target: RedisTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(results_module, "redis_py_version", lambda: (5, 3))
    for _ in use(cluster_target):
        with pytest.raises(MissingDependency, match=r"redis-py 6.1 .*pip install 'redis>=6.1'"):
            rt.add.delay(1, 2)
        with transaction.atomic(), pytest.raises(MissingDependency):  # at the call, not the commit
            rt.add.delay(1, 2)
        assert results_queue().stats()["ready"] == 0
        assert rt.forgetful.delay("plain").queued is True  # tasks without results are unaffected


def test_a_handle_without_a_queue_says_so() -> None:
    with pytest.raises(ResultUnknown, match="result_of"):
        Enqueued("loose").result(timeout=0)
