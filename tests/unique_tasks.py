"""@task functions of the ``unique_for`` tests (tests/test_unique_for.py); runs are recorded
with ``tests.testapp.tasks.record``."""

from __future__ import annotations

from django_redislock import task
from tests.testapp.tasks import record


@task(queue="uniq", unique_for=3600)
def report(day: str) -> str:
    """Once an hour per day at most."""
    record(f"report:{day}")
    return day


@task(queue="uniq", unique_for=2)
def ping(tag: str) -> None:
    """A short window, to see it close."""
    record(f"ping:{tag}")


@task(queue="uniq", unique_for=3600, max_attempts=1)
def fails(tag: str) -> None:
    """Always fails (dead-lettered after one run): a failure opens no window."""
    record(f"fails:{tag}")
    raise ValueError(tag)


@task(queue="uniq", unique_for=3600, store_result=True)
def stored(tag: str) -> str:
    """Keeps its result: its enqueue is the marked MULTI."""
    record(f"stored:{tag}")
    return tag.upper()
