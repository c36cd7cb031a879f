"""@task functions of the task-control tests: retries a task asks for, cancels (see
tests/test_task_control.py and tests/test_cancel.py); runs are recorded with
``tests.testapp.tasks.record``, in Redis, so a worker process's runs are seen too."""

from __future__ import annotations

import asyncio
import os
import time

from django_redislock import Retry, TaskCancelled, current_task, task
from tests.testapp.tasks import record

#: Longest a cancellable task runs when nobody cancels it (seconds).
LONGEST = 60.0


@task(queue="control", max_attempts=10)
def retries_itself(tag: str, until: int) -> int:
    """Asks for a retry (at once) until its run ``until``; returns its attempt."""
    record(f"run:{tag}:{current_task.attempts}")
    if current_task.attempts < until:
        raise Retry(countdown=0)
    return current_task.attempts


@task(queue="control", max_attempts=10)
def retries_twice_at_most(tag: str) -> None:
    record(f"run:{tag}:{current_task.attempts}")
    raise Retry(countdown=0, max_retries=2, exc=OSError("the disk is busy"))


@task(queue="control", max_attempts=5, retry_on=(OSError,), retry_backoff=0.01)
def only_os_errors(tag: str, error: str) -> None:
    record(f"run:{tag}:{current_task.attempts}")
    raise OSError(tag) if error == "os" else ValueError(tag)


@task(queue="control", max_attempts=5, dont_retry_on=(KeyError,), retry_backoff=0.01)
def never_key_errors(tag: str, error: str) -> None:
    record(f"run:{tag}:{current_task.attempts}")
    raise KeyError(tag) if error == "key" else ValueError(tag)


@task(queue="control")
def noted(tag: str) -> str:
    record(f"run:{tag}:{current_task.queue}")
    return tag


@task(queue="control", store_result=True)
def sleeps(tag: str) -> str:
    """Sleeps until cancelled (at most LONGEST); records its start and its cancel."""
    record(f"start:{tag}:{os.getpid()}")
    try:
        time.sleep(LONGEST)  # one long blocking call: the cancel must cut it short (solo)
    except TaskCancelled:
        record(f"cancelled:{tag}:{current_task.cancelled()}")
        raise
    record(f"end:{tag}")
    return tag


@task(queue="control", store_result=True)
def loops(tag: str) -> str:
    """Short sleeps in a loop until cancelled (at most LONGEST): the thread pools' case."""
    record(f"start:{tag}:{os.getpid()}")
    deadline = time.monotonic() + LONGEST
    try:
        while time.monotonic() < deadline:
            time.sleep(0.05)
    except TaskCancelled:
        record(f"cancelled:{tag}:{current_task.cancelled()}")
        raise
    record(f"end:{tag}")
    return tag


@task(queue="control", store_result=True)
async def waits(tag: str) -> str:
    """An ``async def`` task that awaits until cancelled (at most LONGEST)."""
    record(f"start:{tag}:{os.getpid()}")
    try:
        await asyncio.sleep(LONGEST)
    except asyncio.CancelledError:
        record(f"cancelled:{tag}:{current_task.cancelled()}")
        raise
    record(f"end:{tag}")
    return tag


@task(queue="control")
def politely(tag: str) -> str:
    """Catches the cancel, cleans up and returns: the run still ends as cancelled."""
    record(f"start:{tag}:{os.getpid()}")
    deadline = time.monotonic() + LONGEST
    try:
        while time.monotonic() < deadline:
            time.sleep(0.05)
    except TaskCancelled:
        pass
    record(f"cleaned:{tag}:{current_task.cancelled()}")
    return tag
