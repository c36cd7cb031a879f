"""@task functions that store their results (imported by tests/test_results*.py and workers)."""

from __future__ import annotations

import os
import time
from typing import Any

from django_redislock import queues, task


@task(queue="results", store_result=True)
def add(a: int, b: int) -> int:
    return a + b


@task(queue="results", store_result=True, max_attempts=1)
def explode(message: str) -> None:
    raise ValueError(f"exploded: {message}")


@task(queue="results", store_result=True)
def unencodable() -> Any:
    return object()


@task(queue="results", store_result=True, result_ttl=2.0)
def short_lived(value: str) -> str:
    return value


@task(queue="results", store_result=True)
def nap(seconds: float, value: str) -> str:
    time.sleep(seconds)
    return value


@task(queue="results")
def forgetful(value: str) -> str:
    """Does not store its result."""
    return value


#: Where nap_once records its starts (on the default queue alias's server).
STARTS_KEY = "test:{results-runs}:starts"


@task(queue="results", store_result=True)
def nap_once(tag: str, seconds: float) -> str:
    """Records its start, sleeps, returns the tag and the pid of the worker that ran it."""
    queues["default"].client.rpush(STARTS_KEY, f"{tag}:{os.getpid()}")  # type: ignore[attr-defined]
    time.sleep(seconds)
    return f"{tag}:{os.getpid()}"


@task(queue="results", store_result=True)
def keep(value: str) -> str:
    """forgetful's twin that stores its result."""
    return value
