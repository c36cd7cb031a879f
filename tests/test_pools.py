"""The thread and async pools and time limits of the worker, in this process.

Each test runs on fakeredis, a real server and a real cluster (``redis_target``),
except where a real server is needed. The process-level tests (signals, a hung
task, two workers) are in tests/test_pools_process.py.
"""

from __future__ import annotations

import gc
import io
import logging
import threading
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import override_settings

from django_redislock import queues, task
from django_redislock.backends.redis import RedisQueueBackend
from django_redislock.exceptions import InvalidArgument
from django_redislock.queue import Queue
from django_redislock.queue.worker import Worker

from .conftest import RedisTarget
from .testapp import tasks

# the worker calls close_old_connections() around every task, which touches the database
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def alias(redis_target: RedisTarget) -> Iterator[RedisTarget]:
    options = {"RETRY_BACKOFF": 0.01, "RETRY_JITTER": False, "SOCKET_TIMEOUT": 3.0}
    params = {**redis_target.params(**options), "KEY_PREFIX": "test"}
    tasks.CALLS.clear()
    with override_settings(REDISLOCK_QUEUES={"default": params}):
        pool_queue().purge()
        yield redis_target


def pool_queue() -> Queue:
    found: Queue = queues["default"].queue("pool")
    return found


def stamps(kind: str) -> list[tuple[str, float]]:
    """``(tag, wall time)`` of the recorded ``kind`` entries (start, end, fail, ...)."""
    found = []
    for entry in tasks.runs():
        parts = entry.split(":")
        if parts[0] == kind and len(parts) == 4:
            found.append((parts[1], float(parts[3])))
    return found


def most_at_once() -> int:
    """The largest number of runs that were going at the same moment."""
    events = [(t, 1) for _, t in stamps("start")] + [(t, -1) for _, t in stamps("end")]
    running = peak = 0
    for _, step in sorted(events, key=lambda e: (e[0], e[1])):
        running += step
        peak = max(peak, running)
    return peak


def mixed_workload() -> None:
    for i in range(6):
        tasks.wait_io.enqueue(args=[f"s{i}", 0.05], id=f"s{i}")
        tasks.wait_io_async.enqueue(args=[f"a{i}", 0.05], id=f"a{i}")
    tasks.fails_once.enqueue(args=["flaky"], id="flaky")
    tasks.fails_always.enqueue(args=["bad"], id="bad")


@pytest.mark.parametrize("pool", ["solo", "thread", "async"])
def test_each_pool_runs_a_mixed_workload_to_completion(alias: RedisTarget, pool: str) -> None:
    mixed_workload()
    concurrency = 1 if pool == "solo" else 4
    worker = Worker([pool_queue()], pool=pool, concurrency=concurrency, burst=True, timeout=30)
    # the retried task is due again 0.01 s later: a second burst runs it
    summary = worker.run()
    if pool_queue().stats()["delayed"] or pool_queue().stats()["ready"]:
        time.sleep(0.1)
        summary = Worker([pool_queue()], pool=pool, concurrency=concurrency, burst=True).run()
    ends = sorted(tag for tag, _ in stamps("end"))
    assert ends == sorted([f"s{i}" for i in range(6)] + [f"a{i}" for i in range(6)])
    assert [tag for tag, _ in stamps("ok")] == ["flaky"]
    assert sorted(tag for tag, _ in stamps("fail")) == ["bad", "flaky"]
    stats = pool_queue().stats()
    assert (stats["ready"], stats["delayed"], stats["in_flight"], stats["dead"]) == (0, 0, 0, 1)
    dead = pool_queue().tasks("dead")
    assert [t.id for t in dead] == ["bad"] and "always fails: bad" in dead[0].last_error
    assert summary.processed >= 1


@pytest.mark.parametrize("pool", ["thread", "async"])
def test_io_bound_tasks_overlap(alias: RedisTarget, pool: str) -> None:
    make = tasks.wait_io if pool == "thread" else tasks.wait_io_async
    for i in range(32):
        make.enqueue(args=[f"t{i}", 0.5], id=f"t{i}")
    worker = Worker([pool_queue()], pool=pool, concurrency=16, burst=True, timeout=60)
    summary = worker.run()
    assert summary.processed == 32 and summary.succeeded == 32
    assert len(stamps("end")) == 32
    # the runs' own start and end stamps overlap (one at a time would never have two going);
    # half the pool at once leaves room for a loaded machine's slow starts, not for a
    # pool that runs them one by one (the run's duration is a benchmark's, not this test's)
    assert most_at_once() >= 8
    assert pool_queue().stats()["in_flight"] == 0


def test_the_async_pool_runs_an_async_task_without_a_thread_of_its_own(
    alias: RedisTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a thread per run (the rate-limit check of a task that has no limit) halved the pool's rate
    started: list[str] = []
    start = threading.Thread.start

    def recording(self: threading.Thread) -> None:
        started.append(self.name)
        start(self)

    monkeypatch.setattr(threading.Thread, "start", recording)
    for i in range(8):
        tasks.wait_io_async.enqueue(args=[f"a{i}", 0.01], id=f"a{i}")
    summary = Worker([pool_queue()], pool="async", concurrency=4, burst=True, timeout=30).run()
    assert summary.succeeded == 8
    assert "redislock-sync" not in started, started


def test_a_waiting_async_run_keeps_few_objects_for_the_garbage_collector(
    alias: RedisTarget,
) -> None:
    # 47 GC-tracked objects a waiting run (16 of them closures' cells) made the collector pass
    # every 20-40 runs at 32 at once, and its rare full pass (~80 ms) stalled every run
    count = 40
    for i in range(2 * count):
        tasks.wait_io_async.enqueue(args=[f"g{i}", 0.5 if i >= count else 0.0], id=f"g{i:03}")
    q = pool_queue()
    worker = Worker([q], pool="async", concurrency=count, burst=True, timeout=30)
    pool = worker._executor
    try:
        # a first claim's runs warm the loop up (its first task, first timer, first reply)
        pool.submit_all(q, worker._claim(q, count).tasks, 60.0)
        deadline = time.monotonic() + 10
        while pool.running and time.monotonic() < deadline:
            time.sleep(0.01)
        claim = worker._claim(q, count)
        assert len(claim.tasks) == count
        gc.collect()
        gc.disable()
        before = {id(found) for found in gc.get_objects()}
        pool.submit_all(q, claim.tasks, 60.0)
        while len(stamps("start")) < 2 * count and time.monotonic() < deadline:
            time.sleep(0.01)
        kept = [found for found in gc.get_objects() if id(found) not in before]
    finally:
        gc.enable()
        worker.stop()
        while pool.running and time.monotonic() < deadline + 5:
            time.sleep(0.01)
        pool.close()
        worker._keeper.stop()
    assert len(stamps("start")) == 2 * count
    assert len(kept) / count <= 30, Counter(type(found).__name__ for found in kept).most_common(8)


def test_the_async_pool_starts_its_loop_before_its_first_claim(
    alias: RedisTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    # built when the first claim came back, the loop delayed a fresh worker's first run by it
    events: list[str] = []
    start, claim = threading.Thread.start, Worker._claim

    def recording(self: threading.Thread) -> None:
        if self.name == "redislock-async":
            events.append("loop")
        start(self)

    def claiming(self: Worker, queue: Queue, count: int) -> Any:
        events.append("claim")
        return claim(self, queue, count)

    monkeypatch.setattr(threading.Thread, "start", recording)
    monkeypatch.setattr(Worker, "_claim", claiming)
    tasks.wait_io_async.enqueue(args=["a0", 0.01], id="a0")
    summary = Worker([pool_queue()], pool="async", concurrency=2, burst=True, timeout=30).run()
    assert summary.succeeded == 1
    assert events[:2] == ["loop", "claim"], events


def test_claims_never_exceed_the_free_slots(alias: RedisTarget) -> None:
    for i in range(12):
        tasks.wait_io.enqueue(args=[f"t{i}", 0.3], id=f"t{i}")
    q = pool_queue()
    worker = Worker([q], pool="thread", concurrency=3, timeout=30, max_tasks=12)
    thread = threading.Thread(target=worker.run)
    thread.start()
    seen: list[int] = []
    try:
        deadline = time.monotonic() + 30
        while thread.is_alive() and time.monotonic() < deadline:
            seen.append(q.stats()["in_flight"])
            running = worker.current
            assert len(running) <= 3 and all(isinstance(t, float) for t in running.values())
            time.sleep(0.02)
    finally:
        worker.stop()
        thread.join(10)
    # in flight = running + finished but not yet acked (acked within a third of a second)
    assert max(seen) <= 6, seen
    assert worker.summary.processed == 12
    assert (worker.pool, worker.concurrency) == ("thread", 3)


@pytest.mark.parametrize("pool", ["solo", "thread", "async"])
def test_a_hard_limit_ends_a_run_as_a_failed_attempt(alias: RedisTarget, pool: str) -> None:
    make = tasks.sleeps_long_async if pool == "async" else tasks.spins
    make.enqueue(args=["hung"], id="hung")
    tasks.wait_io.enqueue(args=["next", 0], id="next")
    concurrency = 1 if pool == "solo" else 2
    summary = Worker(
        [pool_queue()], pool=pool, concurrency=concurrency, burst=True, timeout=30
    ).run()
    # the limit ended it (the message below), not the worker's 30 s timeout
    assert (summary.failed, summary.dead, summary.succeeded) == (1, 1, 1)
    [dead] = pool_queue().tasks("dead")
    assert dead.id == "hung"
    assert "TimeLimitExceeded: ran longer than 1 s (time_limit)" in dead.last_error
    if pool != "async":
        assert [tag for tag, _ in stamps("cleanup")] == ["hung"]  # its finally ran


def test_solo_interrupts_a_blocking_call_with_sigalrm(alias: RedisTarget) -> None:
    assert threading.current_thread() is threading.main_thread()
    tasks.sleeps_long.enqueue(args=["sleeper"], id="sleeper")
    summary = Worker([pool_queue()], burst=True, timeout=30).run()
    # cut at its limit (the message below), not woken by its 20 s sleep's end
    assert (summary.failed, summary.dead) == (1, 1)
    [dead] = pool_queue().tasks("dead")
    assert "TimeLimitExceeded: ran longer than 1 s" in dead.last_error
    assert stamps("end") == []


@pytest.mark.parametrize("pool", ["solo", "thread", "async"])
def test_a_soft_limit_is_raised_inside_the_task(alias: RedisTarget, pool: str) -> None:
    tasks.cleans_up.enqueue(args=["c"], id="c")
    results: list[Any] = []

    def receiver(sender: Any, result: Any, **kwargs: Any) -> None:
        results.append(result)

    from django_redislock import signals

    signals.task_succeeded.connect(receiver)
    try:
        concurrency = 1 if pool == "solo" else 2
        summary = Worker([pool_queue()], pool=pool, concurrency=concurrency, burst=True).run()
    finally:
        signals.task_succeeded.disconnect(receiver)
    assert summary.succeeded == 1 and results == ["cleaned up"]
    assert [tag for tag, _ in stamps("soft")] == ["c"]


def test_bad_pool_and_concurrency_are_refused(alias: RedisTarget) -> None:
    q = pool_queue()
    with pytest.raises(InvalidArgument, match="pool must be one of solo, thread, async"):
        Worker([q], pool="greenlet")
    with pytest.raises(InvalidArgument, match="concurrency must be a positive integer"):
        Worker([q], pool="thread", concurrency=0)
    with pytest.raises(InvalidArgument, match="concurrency must be 1 with the solo pool"):
        Worker([q], pool="solo", concurrency=4)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"time_limit": 0}, "time_limit must be > 0"),
        ({"time_limit": -1.0}, "time_limit must be > 0"),
        ({"soft_time_limit": "5"}, "soft_time_limit must be a number of seconds"),
        ({"time_limit": 5, "soft_time_limit": 5}, r"soft_time_limit \(5 s\) must be below"),
        ({"soft_time_limit": 30, "lease": 10}, "is not below the lease"),
    ],
)
def test_bad_time_limits_are_refused_at_decoration(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidArgument, match=message):
        task(name="tests.never.registered", **kwargs)(lambda: None)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"TASK_TIME_LIMIT": 0}, "OPTIONS\\['TASK_TIME_LIMIT'\\] must be > 0"),
        ({"TASK_TIME_LIMIT": 5, "TASK_SOFT_TIME_LIMIT": 9}, "must be below OPTIONS"),
        ({"TASK_SOFT_TIME_LIMIT": 90}, "not below OPTIONS\\['VISIBILITY_TIMEOUT'\\]"),
        ({"WORKER_POOL": "process2"}, "OPTIONS\\['WORKER_POOL'\\] must be one of"),
        ({"WORKER_CONCURRENCY": 0}, "OPTIONS\\['WORKER_CONCURRENCY'\\] must be a positive"),
    ],
)
def test_bad_worker_options_are_configuration_errors(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ImproperlyConfigured, match=message):
        RedisQueueBackend("x", {"LOCATION": "redis://127.0.0.1:1/0", "OPTIONS": options})


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--pool", "thread", "--concurrency", "0"], "--concurrency must be at least 1"),
        (["--concurrency", "4"], "--concurrency 4 needs --pool thread, async or process"),
        (["--pool", "greenlet"], "invalid choice: 'greenlet'"),
    ],
)
def test_drain_queue_refuses_bad_pool_options(
    alias: RedisTarget, args: list[str], message: str
) -> None:
    with pytest.raises(CommandError, match=message):
        call_command("drain_queue", "pool", "--burst", *args, stdout=io.StringIO())


def test_drain_queue_runs_a_thread_pool(alias: RedisTarget) -> None:
    for i in range(8):
        tasks.wait_io.enqueue(args=[f"t{i}", 0.1], id=f"t{i}")
    out = io.StringIO()
    call_command(
        "drain_queue", "pool", "--burst", "--pool", "thread", "--concurrency", "8", stdout=out
    )
    assert "processed 8, failed 0" in out.getvalue()
    assert most_at_once() >= 4


@pytest.mark.parametrize("pool", ["solo", "thread", "async"])
def test_each_outcome_is_logged_and_a_failure_has_its_traceback(
    alias: RedisTarget, pool: str, caplog: pytest.LogCaptureFixture
) -> None:
    tasks.fails_always.enqueue(args=["bad"], id="bad")
    tasks.wait_io.enqueue(args=["ok", 0], id="ok")
    with caplog.at_level(logging.DEBUG, "django_redislock"):
        concurrency = 1 if pool == "solo" else 2
        Worker([pool_queue()], pool=pool, concurrency=concurrency, burst=True, timeout=30).run()
    failed = [r for r in caplog.records if "task bad " in r.getMessage()]
    assert failed and failed[0].levelno == logging.ERROR and failed[0].exc_info
    assert "Traceback (most recent call last)" in caplog.text
    assert "always fails: bad" in caplog.text
    assert any(
        "task ok " in r.getMessage() and "succeeded" in r.getMessage() for r in caplog.records
    )


@pytest.mark.parametrize("pool", ["solo", "thread", "async"])
def test_a_forced_stop_a_task_raises_itself_is_that_tasks_failure(
    alias: RedisTarget, pool: str
) -> None:
    # the worker lets only the ForcedStop instance it raised itself through a run
    from . import hell_tasks

    hell = queues["default"].queue(hell_tasks.QUEUE)
    hell.purge()
    hell_tasks.raises_forced_stop.enqueue(args=["own"], id="own")
    hell_tasks.good.enqueue(args=["after"], id="after")
    concurrency = 1 if pool == "solo" else 2
    summary = Worker([hell], pool=pool, concurrency=concurrency, burst=True, timeout=30).run()
    assert (summary.processed, summary.failed, summary.dead) == (2, 1, 1)
    [dead] = hell.tasks("dead")
    assert dead.id == "own" and "ForcedStop: a task's own" in (dead.last_error or "")


@pytest.mark.parametrize("pool", ["thread", "async"])
def test_a_failed_run_is_no_longer_live_when_its_retry_is_sent(
    alias: RedisTarget, pool: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A retry due 10 ms later could be claimed by another slot of the same worker before the
    failed run had left it: the claim took the new attempt for a lapsed lease of the run still
    "going" and adopted it into that ending run, so the retry waited out its whole lease."""
    seen: list[bool] = []
    worker = Worker([pool_queue()], pool=pool, concurrency=4, burst=True, timeout=30)
    for name in ("retry", "retry_async"):
        original = getattr(Queue, name)

        def recording(
            self: Queue, task: Any, *args: Any, _original: Any = original, **kw: Any
        ) -> Any:
            seen.append((self.name, task.id) in worker._live)
            return _original(self, task, *args, **kw)

        monkeypatch.setattr(Queue, name, recording)
    tasks.fails_once.enqueue(args=["flaky"], id="flaky")
    worker.run()
    assert seen and not any(seen), seen
