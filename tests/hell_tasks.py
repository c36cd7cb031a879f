"""The "task from hell" tasks: every way a task can end other than returning or raising an
``Exception``, for :mod:`tests.test_task_from_hell`.

Listed in ``REDISLOCK_TASK_MODULES`` by that test's workers. Each run records
``<kind>:<tag>:<pid>`` in the shared runs list (:func:`tests.testapp.tasks.record`)
before it misbehaves, so the test counts runs, not only outcomes. Every bad task has
``max_attempts=1``: charged once, it is dead.
"""

from __future__ import annotations

import asyncio
import ctypes
import os
import sys
import time
from typing import Any

from django_redislock import task

from .testapp.tasks import record

QUEUE = "hell"
ONCE: dict[str, Any] = {"queue": QUEUE, "max_attempts": 1}


@task(queue=QUEUE)
def good(tag: str) -> None:
    record(f"good:{tag}:{os.getpid()}")


@task(queue=QUEUE)
async def good_async(tag: str) -> None:
    await asyncio.sleep(0)
    record(f"good:{tag}:{os.getpid()}")


def misbehave(how: str) -> None:
    """Raise or do what ``how`` names (the same in the sync and the async tasks)."""
    if how == "exit0":
        sys.exit(0)
    if how == "exit3":
        raise SystemExit(3)
    if how == "interrupt":
        raise KeyboardInterrupt
    if how == "cancelled":
        raise asyncio.CancelledError
    if how == "generator_exit":
        raise GeneratorExit
    if how == "recursion":

        def deeper(n: int) -> int:
            return deeper(n + 1) + 1

        deeper(0)
    if how == "os_exit":
        os._exit(9)
    if how == "segfault":
        ctypes.string_at(0)
    raise AssertionError(f"unknown way to misbehave: {how}")


@task(**ONCE)
def bad(how: str, tag: str) -> None:
    record(f"bad:{tag}:{os.getpid()}")
    misbehave(how)


@task(**ONCE)
async def bad_async(how: str, tag: str) -> None:
    record(f"bad:{tag}:{os.getpid()}")
    await asyncio.sleep(0)
    misbehave(how)


@task(**ONCE, time_limit=1.0)
def overruns(tag: str) -> None:
    """Python code that runs past its hard limit: ``TimeLimitExceeded`` ends it."""
    record(f"bad:{tag}:{os.getpid()}")
    end = time.monotonic() + 30
    while time.monotonic() < end:
        time.sleep(0.02)


@task(**ONCE, time_limit=1.0)
async def overruns_async(tag: str) -> None:
    record(f"bad:{tag}:{os.getpid()}")
    await asyncio.sleep(30)


@task(queue=QUEUE, time_limit=0.5)
async def blocks_loop_then_ends(tag: str) -> None:
    """Blocks the event loop past its limit and the grace, then returns."""
    record(f"bad:{tag}:{os.getpid()}")
    time.sleep(3.5)
    record(f"ended:{tag}:{os.getpid()}")


@task(**ONCE, time_limit=20.0)
async def bad_async_limited(how: str, tag: str) -> None:
    """As ``bad_async``, awaited under its hard limit (``asyncio.wait_for`` makes it a Task)."""
    record(f"bad:{tag}:{os.getpid()}")
    await asyncio.sleep(0)
    misbehave(how)


@task(queue=QUEUE)
async def blocks_loop(tag: str, seconds: float) -> None:
    """An ``async def`` task that blocks its event loop (a sync sleep), without a time limit."""
    record(f"bad:{tag}:{os.getpid()}")
    time.sleep(seconds)
    record(f"ended:{tag}:{os.getpid()}")


@task(queue=QUEUE)
def sleeps(tag: str, seconds: float) -> None:
    """A good task that takes a while (a sync one runs in a thread of its own in ``async``)."""
    time.sleep(seconds)
    record(f"good:{tag}:{os.getpid()}")


@task(**ONCE)
def raises_forced_stop(tag: str) -> None:
    """Raises a ``ForcedStop`` of its own: not the worker's stop (that one is told by identity)."""
    from django_redislock.queue.stops import ForcedStop

    record(f"bad:{tag}:{os.getpid()}")
    raise ForcedStop("a task's own")
