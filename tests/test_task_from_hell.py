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
the worker dies; the task's first run is not charged (claims charge nothing), it comes
back as a suspect after its lease, and its next run is charged before it starts, so
with ``max_attempts=1`` the claim after that dead-letters it ("lease expired"). Those
rows run in the solo pool (the thread and async pools die the same way: one process)
and in the process pool (the supervisor replaces the child). See docs/workers.md,
"What each failure does (tasks from hell)".
"""

from __future__ import annotations

import signal
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
