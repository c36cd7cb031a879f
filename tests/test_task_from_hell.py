"""The "task from hell" matrix: every way a task can end, in every pool, on real workers.

For each pool (solo, thread, async, process) one ``drain_queue`` process drains a queue
that mixes good tasks with tasks that raise ``SystemExit(0)``, ``SystemExit(3)``,
``KeyboardInterrupt``, ``asyncio.CancelledError``, ``GeneratorExit``, exhaust the
recursion limit or run past their hard time limit (the async pool: each as a sync and
as an ``async def`` task). Every good task runs exactly once, every bad one runs once
and is charged once (``max_attempts=1``: dead with one attempt), the worker stays
listed healthy in ``list_workers`` all along (its pool threads and loop survive), and
one SIGTERM ends it with status 0.

A task that kills its process (``os._exit``, a segfault) cannot be caught in-process:
the worker dies (the supervisor replaces a process pool's child); the killed run is
charged when its lease is found expired, so with ``max_attempts=1`` it is dead after
its one run. Those rows run in the solo pool (the thread and async pools die the same
way: one process) and in the process pool. See docs/workers.md,
"What each failure does (tasks from hell)".
"""

from __future__ import annotations

import signal
import time
from collections import Counter
from typing import Any

import pytest

from django_redislock import queues
from django_redislock.queue import Queue
from django_redislock.queue.workers import list_workers

from . import hell_tasks
from .conftest import RedisTarget
from .processes import finish, spawn, wait_for
from .testapp import tasks

pytestmark = pytest.mark.slow

#: what a bad task does, besides running past its limit
RAISERS = ["exit0", "exit3", "interrupt", "cancelled", "generator_exit", "recursion"]
OPTIONS = {"WORKER_HEARTBEAT": 0.2, "WORKER_HEARTBEAT_TTL": 3.0}
MODULES = ["tests.hell_tasks"]


def hell() -> Queue:
    found: Queue = queues["default"].queue(hell_tasks.QUEUE)
    return found


def recorded(kind: str) -> Counter[str]:
    """How many runs of each tag recorded ``kind``."""
    return Counter(e.split(":")[1] for e in tasks.runs() if e.split(":")[0] == kind)


def fill(pool: str) -> tuple[list[str], list[str]]:
    """Enqueue the matrix, good and bad interleaved; returns (good ids, bad ids)."""
    goods, bads = [], []
    cases: list[tuple[Any, list[Any], str]] = [(hell_tasks.bad, [how, how], how) for how in RAISERS]
    cases.append((hell_tasks.overruns, ["overrun"], "overrun"))
    if pool == "async":
        cases += [(hell_tasks.bad_async, [how, f"a-{how}"], f"a-{how}") for how in RAISERS]
        cases.append((hell_tasks.overruns_async, ["a-overrun"], "a-overrun"))
        for how in ("exit3", "interrupt", "generator_exit"):
            cases.append((hell_tasks.bad_async_limited, [how, f"l-{how}"], f"l-{how}"))
    for number, (fn, args, tag) in enumerate(cases):
        good = hell_tasks.good_async if pool == "async" and number % 2 else hell_tasks.good
        good.enqueue(args=[f"g{number}"], id=f"g{number}")
        goods.append(f"g{number}")
        fn.enqueue(args=args, id=tag)
        bads.append(tag)
    hell_tasks.good.enqueue(args=["last"], id="last")
    return [*goods, "last"], bads


@pytest.mark.parametrize("pool", ["solo", "thread", "async", "process"])
def test_every_exception_a_task_raises_costs_that_task_only(real: RedisTarget, pool: str) -> None:
    goods, bads = fill(pool)
    extra = [] if pool == "solo" else ["--concurrency", "2"]
    worker = spawn(
        real, hell_tasks.QUEUE, "--pool", pool, *extra, "--lease", "20", "--batch", "5",
        task_modules=MODULES, options=OPTIONS,
    )  # fmt: skip
    seen_healthy: set[int] = set()

    def drained() -> bool:
        assert worker.poll() is None, finish(worker)  # no task may end the worker
        for info in list_workers(queues["default"]).workers:  # type: ignore[arg-type]
            assert info.healthy, (info.health, info.wedged)
            seen_healthy.add(info.pid)
        return len(hell().tasks("dead")) == len(bads) and set(recorded("good")) == set(goods)

    try:
        wait_for(drained, 90, "every task of the matrix to end")
        wait_for(lambda: bool(seen_healthy), 10, "a heartbeat")
        worker.send_signal(signal.SIGTERM)
        code, out, err = finish(worker, timeout=30)  # the grace: no task is running
    finally:
        worker.kill()
    assert code == 0, out + err
    assert recorded("good") == Counter({tag: 1 for tag in goods})  # exactly once each
    assert recorded("bad") == Counter({tag: 1 for tag in bads})  # one run each
    dead = {t.id: t for t in hell().tasks("dead")}
    assert sorted(dead) == sorted(bads)
    assert all(t.attempts == 1 for t in dead.values()), {t.id: t.attempts for t in dead.values()}
    for how in RAISERS:
        name = {
            "exit0": "SystemExit", "exit3": "SystemExit", "interrupt": "KeyboardInterrupt",
            "cancelled": "CancelledError", "generator_exit": "GeneratorExit",
            "recursion": "RecursionError",
        }[how]  # fmt: skip
        assert name in (dead[how].last_error or ""), (dead[how].last_error, err)
    assert "TimeLimitExceeded" in (dead["overrun"].last_error or "")
    stats = hell().stats()
    assert (stats["ready"], stats["delayed"], stats["in_flight"]) == (0, 0, 0)
    if pool != "process":
        assert "SystemExit" in err and "KeyboardInterrupt" in err  # the tracebacks are logged


def me(pid: int) -> Any:
    """This worker's entry in ``list_workers`` (None when it is not listed)."""
    found = [w for w in list_workers(queues["default"]).workers if w.pid == pid]  # type: ignore[arg-type]
    return found[0] if found else None


def test_a_blocked_event_loop_is_listed_wedged_until_it_answers(real: RedisTarget) -> None:
    # an async def task that sleeps synchronously blocks every run of its pool: the worker
    # beats on (its heartbeat is a thread of its own) but must not be listed as healthy
    hell_tasks.blocks_loop.enqueue(args=["block", 6.0], id="block")
    worker = spawn(
        real, hell_tasks.QUEUE, "--pool", "async", "--concurrency", "2",
        task_modules=MODULES, options=OPTIONS,
    )  # fmt: skip
    try:
        wait_for(lambda: recorded("bad")["block"] == 1, 30, "the task to block the loop")
        wait_for(lambda: me(worker.pid) is not None and not me(worker.pid).healthy, 10, "wedged")
        assert "event loop has not answered" in me(worker.pid).wedged
        assert me(worker.pid).as_dict(0)["health"] == "wedged"
        wait_for(lambda: recorded("ended")["block"] == 1, 30, "the task to end")
        wait_for(lambda: me(worker.pid) is not None and me(worker.pid).healthy, 10, "healthy")
        worker.send_signal(signal.SIGTERM)
        code, out, err = finish(worker, timeout=30)
    finally:
        worker.kill()
    assert code == 0, out + err
    assert "processed 1, failed 0" in out, out


def test_a_run_stuck_past_its_limit_is_listed_wedged(real: RedisTarget) -> None:
    # the thread cannot be interrupted (blocked in C): the worker waits for its other run
    # to end before it exits; meanwhile the registry shows why it is no use
    tasks.hangs_in_c.enqueue(args=["hung", 8.0], id="hung")
    tasks.wait_io.enqueue(args=["long", 5.0], id="long")
    worker = spawn(
        real, "pool", "--pool", "thread", "--concurrency", "2", "--lease", "15", options=OPTIONS
    )
    try:
        wait_for(lambda: me(worker.pid) is not None and not me(worker.pid).healthy, 30, "wedged")
        assert "stuck past its time limit" in me(worker.pid).wedged
        code, out, err = finish(worker, timeout=40)
    finally:
        worker.kill()
    assert code == 1 and "outlived its time limit" in err, out + err


def test_an_async_run_that_blocked_past_its_limit_then_ended_is_not_said_to_come_back(
    real: RedisTarget,
) -> None:
    # the limit watch gives up on "late" 2.5 s in and stops the worker; "slow", claimed with
    # it, is still waiting for the blocked loop to start it, so the worker waits too; the
    # loop finishes "late" (3.5 s), then gives "slow" back unstarted
    hell_tasks.blocks_loop_then_ends.enqueue(args=["late"], id="late")
    hell_tasks.sleeps.enqueue(args=["slow", 6.0], id="slow")
    worker = spawn(
        real, hell_tasks.QUEUE, "--pool", "async", "--concurrency", "2",
        task_modules=MODULES, options=OPTIONS,
    )  # fmt: skip
    code, out, err = finish(worker, timeout=40)
    assert code == 1, (out, err)  # it stopped because of the task: never 0
    assert recorded("ended")["late"] == 1
    assert "then ended (its outcome was recorded)" in err, err
    assert "comes back" not in err, err
    late = hell().get("late")
    # its outcome is what the run's end recorded: acked (gone) or failed, never left in flight
    assert late is None or late.state != "in_flight", late


def test_a_second_sigterm_gives_a_solo_batch_back_at_once(real: RedisTarget) -> None:
    tasks.wait_io.enqueue(args=["first", 30.0], id="first")
    for i in range(5):
        tasks.wait_io.enqueue(args=[f"w{i}", 0], id=f"w{i}")
    worker = spawn(real, "pool", "--batch", "10", "--lease", "60")
    try:
        wait_for(lambda: any(e.startswith("start:first") for e in tasks.runs()), 30, "a start")
        worker.send_signal(signal.SIGTERM)
        time.sleep(0.5)  # two signals at once would be one (they do not queue)
        assert worker.poll() is None  # the first one waits for the running task
        worker.send_signal(signal.SIGTERM)
        code, out, err = finish(worker, timeout=30)
    finally:
        worker.kill()
    assert code == 1 and "stopped at once by a second SIGTERM" in err, out + err
    q: Queue = queues["default"].queue("pool")
    ready = sorted((t.id, t.attempts) for t in q.top(10))
    assert ready == [(f"w{i}", 0) for i in range(5)]  # back at once, not after the 60 s lease
    first = q.get("first")
    assert first is not None and first.state == "in_flight"  # interrupted: its lease ends


@pytest.mark.parametrize("pool", ["solo", "process"])
def test_a_task_that_kills_its_process_is_charged_once(real: RedisTarget, pool: str) -> None:
    # os._exit and a segfault end the process (solo, thread and async alike: one process).
    # The killed run is charged when its lease is found expired ("lease expired during
    # attempt 1"): with max_attempts=1 it is dead, one run, one attempt (with more attempts it
    # would come back as a suspect). --batch 1: each claim acks the task before it, so no
    # good task runs twice.
    for number, how in enumerate(["os_exit", "segfault"]):
        hell_tasks.good.enqueue(args=[f"g{number}"], id=f"g{number}")
        hell_tasks.bad.enqueue(args=[how, how], id=how)
    hell_tasks.good.enqueue(args=["last"], id="last")
    args = [hell_tasks.QUEUE, "--pool", pool, "--batch", "1", "--lease", "2"]
    codes = []

    def settled() -> bool:
        stats = hell().stats()
        return (stats["ready"], stats["delayed"], stats["in_flight"], stats["dead"]) == (
            0, 0, 0, 2
        )  # fmt: skip

    if pool == "process":
        worker = spawn(real, *args, "--concurrency", "1", task_modules=MODULES)
        try:
            wait_for(settled, 90, "both killers to be dead-lettered")
            worker.send_signal(signal.SIGTERM)
            code, out, err = finish(worker, timeout=30)
        finally:
            worker.kill()
        assert code == 0, out + err
        assert err.count("was killed by SIGSEGV") == 1 and err.count("exited with 9") == 1, err
    else:
        for _ in range(8):  # a bounded number of workers, each until it dies or runs dry
            worker = spawn(real, *args, "--burst", task_modules=MODULES)
            code, out, err = finish(worker, timeout=30)
            codes.append(code)
            if settled():
                break
            time.sleep(2.2)  # the dead worker's lease
        assert [c for c in codes if c] == [9, -signal.SIGSEGV], codes
    assert recorded("good") == Counter({"g0": 1, "g1": 1, "last": 1})
    assert recorded("bad") == Counter({"os_exit": 1, "segfault": 1})  # one run, one worker each
    dead = {t.id: t for t in hell().tasks("dead")}
    assert sorted(dead) == ["os_exit", "segfault"]
    assert all(t.attempts == 1 for t in dead.values())  # charged once for its one run
    assert all("lease expired" in (t.last_error or "") for t in dead.values())
