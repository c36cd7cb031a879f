"""@task functions the queue tests run (found by drain_queue's autodiscovery of ``tasks``)."""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

from django_redislock import queues, task

#: Where tasks record their runs (a list on the default queue alias's server).
RUNS_KEY = "test:{runs}:list"
#: Runs in this process, for in-process tests.
CALLS: list[Any] = []


def record(entry: str) -> None:
    CALLS.append(entry)
    queues["default"].client.rpush(RUNS_KEY, entry)  # type: ignore[attr-defined]


def runs() -> list[str]:
    """Every recorded run, in order."""
    client = queues["default"].client  # type: ignore[attr-defined]
    return [item.decode() for item in client.lrange(RUNS_KEY, 0, -1)]


@task(queue="tests")
def remember(tag: str, **extra: Any) -> str:
    record(tag)
    return tag


@task(queue="tests", max_attempts=2)
def always_fails(tag: str) -> None:
    record(f"fail:{tag}")
    raise ValueError(f"always fails: {tag}")


@task(queue="tests", unique=True)
def unique_job(a: int, b: int = 0) -> int:
    record(f"unique:{a}:{b}")
    return a + b


@task(queue="slow")
def slow(tag: str, seconds: float) -> None:
    record(f"start:{tag}:{os.getpid()}")
    time.sleep(seconds)
    record(f"end:{tag}")


@task(queue="tests")
async def remember_async(tag: str) -> str:
    await asyncio.sleep(0)
    record(f"async:{tag}")
    return tag
