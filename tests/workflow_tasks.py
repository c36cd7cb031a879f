"""@task functions of the workflow tests (tests/test_workflows*.py); all on the queue "wf"."""

from __future__ import annotations

import os
import time
from typing import Any

from django_redislock import queues, task

#: Where members record their runs (a list on the default alias's server).
RUNS_KEY = "test:{wfruns}:list"


def record(entry: str) -> None:
    queues["default"].client.rpush(RUNS_KEY, entry)  # type: ignore[attr-defined]


def runs() -> list[str]:
    client = queues["default"].client  # type: ignore[attr-defined]
    return [item.decode() for item in client.lrange(RUNS_KEY, 0, -1)]


@task(queue="wf")
def add(x: int, y: int) -> int:
    record(f"add:{x}:{y}")
    return x + y


@task(queue="wf")
def double(x: int) -> int:
    record(f"double:{x}")
    return 2 * x


@task(queue="wf", max_attempts=1)
def boom(x: Any) -> None:
    record(f"boom:{x}")
    raise ValueError(f"boom {x}")


@task(queue="wf")
def square(x: int, pause: float = 0.0) -> int:
    if pause:
        time.sleep(pause)
    record(f"square:{x}:{os.getpid()}")
    return x * x


@task(queue="wf")
def collect(results: list[Any], tag: str) -> int:
    """A chord callback: records the results it got (failed members as their error type)."""
    shown = [type(r).__name__ if isinstance(r, Exception) else r for r in results]
    record(f"collect:{tag}:{shown}")
    return sum(r for r in results if isinstance(r, int))


@task(queue="wf", max_attempts=3, retry_backoff=0.0, retry_backoff_max=0.0)
def flaky(x: int, tag: str) -> int:
    """Fails on its first run, succeeds on its second (counted by a Redis counter)."""
    client = queues["default"].client  # type: ignore[attr-defined]
    n = client.incr(f"test:{{wfruns}}:flaky:{tag}:{x}")
    record(f"flaky:{tag}:{x}:{n}")
    if n == 1:
        raise OSError("first run fails")
    return x * x


@task(queue="wf", lease=2.0)
def die_once(x: int, tag: str) -> int:
    """SIGKILLs its own worker on its first run (a Redis counter), returns x*x after."""
    client = queues["default"].client  # type: ignore[attr-defined]
    n = client.incr(f"test:{{wfruns}}:die:{tag}:{x}")
    record(f"die:{tag}:{x}:{n}")
    if n == 1:
        os.kill(os.getpid(), 9)
    return x * x


@task(queue="wf")
def note(tag: str) -> str:
    record(f"note:{tag}")
    return tag


@task(queue="wf")
def gather(results: list[Any], tag: str) -> int:
    """A chord callback that records the worker process it ran in (``gather:<tag>:<pid>``)."""
    record(f"gather:{tag}:{os.getpid()}")
    return sum(r for r in results if isinstance(r, int))
