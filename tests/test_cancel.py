"""Cancelling a task (issue 29, item 3): a queued one is removed; a running one is told
through Redis (its lease renewal reads the request) and stopped by each pool; the run ends
as "cancelled" in its history and result. On a real server and a real cluster; the
process-level cases (solo in the main thread, the process pool) are at the end."""

from __future__ import annotations

import io
import threading
import time
from collections.abc import Iterator

import pytest
from django.core.management import call_command
from django.test import override_settings

from django_redislock import queues
from django_redislock.exceptions import TaskFailed
from django_redislock.queue import Queue, history
from django_redislock.queue.handles import Enqueued
from django_redislock.queue.results import ResultStatus
from django_redislock.queue.stats import counters_key
from django_redislock.queue.worker import Worker

from . import control_tasks as ct
from .conftest import RedisTarget
from .processes import finish, spawn, wait_for
from .testapp import tasks

pytestmark = pytest.mark.django_db(transaction=True)

#: A short lease: the worker renews it, and so reads a cancel, every half second.
LEASE = 1.5


@pytest.fixture
def alias(real: RedisTarget) -> Iterator[RedisTarget]:
    options = {"RETRY_BACKOFF": 0.01, "SOCKET_TIMEOUT": 3.0, "VISIBILITY_TIMEOUT": LEASE}
    # the prefix of the drain_queue processes (tests/queue_worker_settings.py)
    params = {**real.params(**options), "KEY_PREFIX": "test"}
    with override_settings(REDISLOCK_QUEUES={"default": params}):
        control().purge()
        queues["default"].client.delete(tasks.RUNS_KEY)  # type: ignore[attr-defined]
        yield real
        control().purge()


def control() -> Queue:
    found: Queue = queues["default"].queue("control")
    return found


def recorded(kind: str, tag: str) -> list[str]:
    return [e for e in tasks.runs() if e.split(":")[:2] == [kind, tag]]


def wait_recorded(kind: str, tag: str, seconds: float = 30) -> None:
    wait_for(lambda: recorded(kind, tag), seconds, f"{kind}:{tag}")


def test_a_queued_task_is_removed_and_shows_cancelled(alias: RedisTarget) -> None:
    call = ct.sleeps.enqueue(args=["queued"], delay=60)
    assert call.cancel() == "removed"
    assert control().get(call) is None
    assert control().stats()["delayed"] == 0
    assert call.status is ResultStatus.CANCELLED
    with pytest.raises(TaskFailed, match="was cancelled"):
        call.result(timeout=5)
    assert [run.outcome for run in history.read(control(), call)] == ["cancelled"]


def test_cancelling_what_already_finished_is_a_clear_no_op(alias: RedisTarget) -> None:
    done = ct.noted.delay("done")
    Worker([control()], burst=True, timeout=30).run()
    assert recorded("run", "done")
    before = control().stats()
    assert done.cancel() == "finished"
    assert control().cancel("never-queued") == "finished"
    assert control().stats() == before
    out = io.StringIO()
    call_command("cancel_task", str(done), "--queue", "control", stdout=out)
    assert "Nothing to cancel" in out.getvalue() and "Nothing changed" in out.getvalue()
    assert not queues["default"].client.exists(control().cancel_key)  # type: ignore[attr-defined]


def test_the_command_removes_a_queued_task(alias: RedisTarget) -> None:
    call = ct.noted.enqueue(args=["cmd"], delay=60)
    out = io.StringIO()
    call_command("cancel_task", str(call), "--queue", "control", stdout=out)
    assert "it was queued and is removed" in out.getvalue()
    assert control().get(call) is None


def run_worker(pool: str) -> tuple[Worker, threading.Thread]:
    worker = Worker([control()], pool=pool, concurrency=1 if pool == "solo" else 2, timeout=60)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    return worker, thread


def cancel_while_it_runs(fn: object, tag: str, pool: str) -> Enqueued:
    """Start ``fn(tag)`` on a worker of ``pool``, cancel it once it runs; its handle."""
    call: Enqueued = fn.delay(tag)  # type: ignore[attr-defined]
    worker, thread = run_worker(pool)
    try:
        wait_recorded("start", tag)
        assert call.cancel("stop it") == "requested"
        with pytest.raises(TaskFailed, match="was cancelled"):
            call.result(timeout=30)
    finally:
        worker.stop()
        thread.join(60)
    assert not thread.is_alive()
    return call


@pytest.mark.parametrize(
    ("pool", "fn"),
    [
        ("thread", ct.loops),
        ("async", ct.loops),  # a sync task of the async pool: its own thread
        ("async", ct.waits),  # an async def task: its asyncio task is cancelled
        ("solo", ct.loops),  # solo outside the main thread: as the time limit, in-thread
    ],
    ids=["thread", "async-sync", "async-coroutine", "solo-thread"],
)
def test_a_running_task_is_stopped_by_each_pool(alias: RedisTarget, pool: str, fn: object) -> None:
    tag = f"run-{pool}-{getattr(fn, '__name__', '')}"
    call = cancel_while_it_runs(fn, tag, pool)
    assert recorded("cancelled", tag) == [f"cancelled:{tag}:True"]  # current_task.cancelled()
    assert recorded("end", tag) == []  # it did not run to its end
    dead = control().get(call)
    assert dead is not None and dead.state == "dead"
    assert dead.last_error.startswith("TaskCancelled: ")
    assert [run.outcome for run in history.read(control(), call)] == ["cancelled"]
    assert call.status is ResultStatus.CANCELLED
    counters = queues["default"].client.hgetall(counters_key(control()))  # type: ignore[attr-defined]
    assert counters[b"cancelled"] == b"1" and b"failed" not in counters
    assert not queues["default"].client.hexists(control().cancel_key, call)  # type: ignore[attr-defined]


def test_a_task_that_catches_the_cancel_and_returns_still_ends_cancelled(
    alias: RedisTarget,
) -> None:
    call = ct.politely.delay("polite")
    worker, thread = run_worker("thread")
    try:
        wait_recorded("start", "polite")
        assert call.cancel() == "requested"
        wait_recorded("cleaned", "polite")
        wait_for(
            lambda: getattr(control().get(call), "state", None) == "dead",
            30,
            "the cancelled run recorded",
        )
    finally:
        worker.stop()
        thread.join(60)
    assert recorded("cleaned", "polite") == ["cleaned:polite:True"]
    assert [run.outcome for run in history.read(control(), call)] == ["cancelled"]


def test_a_cancel_sent_while_no_worker_runs_the_task_is_not_lost(alias: RedisTarget) -> None:
    """A worker that claimed the task and died: the request waits in Redis, and the worker
    that runs the task after the lease expired stops it."""
    call = ct.loops.delay("orphan")
    [claimed] = control().claim(1, lease=0.2, start=False).tasks  # a worker that dies now
    assert claimed.id == call
    assert call.cancel() == "requested"
    call2 = ct.noted.delay("after")  # the queue goes on
    worker, thread = run_worker("thread")
    try:
        wait_recorded("start", "orphan")
        with pytest.raises(TaskFailed, match="was cancelled"):
            call.result(timeout=30)
        wait_recorded("run", "after")
    finally:
        worker.stop()
        thread.join(60)
    assert call2.status is not ResultStatus.CANCELLED
    assert [run.outcome for run in history.read(control(), call)][-1] == "cancelled"


# -- real worker processes ---------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("pool", ["solo", "process"])
def test_a_worker_process_stops_the_run_it_is_running(alias: RedisTarget, pool: str) -> None:
    """``drain_queue`` solo (the run in the main thread: one long blocking ``sleep``, cut
    short by the cancel as by a time limit) and the process pool (the child's run)."""
    call = ct.sleeps.delay(f"proc-{pool}")
    extra = ["--pool", "process", "--concurrency", "1"] if pool == "process" else []
    worker = spawn(
        alias,
        "control",
        *extra,
        "--burst",
        "--timeout",
        "50",
        task_modules=["tests.control_tasks"],
        options={"VISIBILITY_TIMEOUT": LEASE},
    )
    try:
        try:
            wait_recorded("start", f"proc-{pool}", 40)
        except AssertionError:
            worker.kill()
            raise AssertionError(str(worker.communicate())) from None
        out = io.StringIO()
        call_command("cancel_task", str(call), "--queue", "control", stdout=out)
        assert "it is running" in out.getvalue()
        with pytest.raises(TaskFailed, match="was cancelled"):
            call.result(timeout=30)
    finally:
        code, stdout, stderr = finish(worker, timeout=60)
    assert code == 0, stdout + stderr
    assert recorded("cancelled", f"proc-{pool}") == [f"cancelled:proc-{pool}:True"]
    assert recorded("end", f"proc-{pool}") == []  # the 60 s sleep did not run out
    assert [run.outcome for run in history.read(control(), call)] == ["cancelled"]


def test_a_claimed_task_cancelled_before_it_started_is_not_started(alias: RedisTarget) -> None:
    """Solo claims a batch: a task waiting behind the running one is in flight, so its
    cancel is a request; the renewal of the batch brings it, and it never starts."""
    first = ct.loops.delay("first")
    second = ct.noted.delay("second")
    worker, thread = run_worker("solo")
    try:
        wait_recorded("start", "first")
        assert second.cancel() == "requested"  # claimed with the first one, not started
        time.sleep(2 * LEASE)  # renewals of the batch (every LEASE / 3) read the request
        assert first.cancel() == "requested"
        wait_for(lambda: getattr(control().get(second), "state", None) == "dead", 30, "second")
    finally:
        worker.stop()
        thread.join(60)
    assert recorded("run", "second") == []  # never started
    assert [run.outcome for run in history.read(control(), second)] == ["cancelled"]
    assert [run.outcome for run in history.read(control(), first)] == ["cancelled"]


def test_a_cancel_request_its_run_never_read_does_not_stay_behind(alias: RedisTarget) -> None:
    """A run that ended before its next lease renewal never read its cancel request.

    The request stayed in the queue's cancel hash for good (one field per such task); each
    later cancel now drops requests of tasks no longer in flight.
    """
    q = control()
    client = queues["default"].client  # type: ignore[attr-defined]
    first = ct.noted.enqueue(args=["first"], id="first")
    [running] = q.pop(1)
    assert q.cancel(first) == "requested"
    assert q.ack(running) == 1  # it finished before a renewal read the request
    assert client.hexists(q.cancel_key, "first")
    second = ct.noted.enqueue(args=["second"], id="second")
    [also_running] = q.pop(1)
    assert q.cancel(second) == "requested"
    assert set(client.hkeys(q.cancel_key)) == {b"second"}  # the stale request is gone
    # a request whose run failed and was retried stays for the next run to read
    assert q.retry(also_running, delay=60, error="boom") == "retried"
    third = ct.noted.enqueue(args=["third"], id="third")
    [running_third] = q.pop(1)
    assert q.cancel(third) == "requested"
    assert set(client.hkeys(q.cancel_key)) == {b"second", b"third"}
    q.ack(running_third)
