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


@task(queue="tests", max_attempts=3, retry_backoff=100.0, retry_backoff_max=100.0)
def fails_slowly(tag: str) -> None:
    """Fails; retried after its own 100 s backoff, not the alias's."""
    record(f"fail-slowly:{tag}")
    raise ValueError(f"fails slowly: {tag}")


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


# -- claims: tasks the claim/failure tests run in drain_queue processes ------------------


@task(queue="claims")
def step(tag: str, seconds: float = 0) -> None:
    record(f"run:{tag}:{os.getpid()}")
    time.sleep(seconds)
    record(f"done:{tag}")


@task(queue="claims")
def kills_worker(tag: str) -> None:
    """Ends its worker at once, as an OOM kill would (no cleanup, no ack)."""
    record(f"kill:{tag}:{os.getpid()}")
    os._exit(137)


@task(queue="claims", max_attempts=1)
def kills_worker_once(tag: str) -> None:
    record(f"kill:{tag}:{os.getpid()}")
    os._exit(137)


@task(queue="claims", max_attempts=3)
def kills_worker_thrice(tag: str) -> None:
    record(f"kill:{tag}:{os.getpid()}")
    os._exit(137)


@task(queue="limited", rate_limit="20/s")
def rate_limited(tag: str) -> None:
    """Runs at most 20 times a second across all workers (tests/test_flow_process.py)."""
    record(tag)


@task(queue="tests", priority=7)
def urgent(tag: str) -> str:
    """Queued at priority level 7 unless a call says otherwise (tests/test_priority_*.py)."""
    record(f"urgent:{tag}")
    return tag
