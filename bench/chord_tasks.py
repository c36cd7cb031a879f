"""The tasks of :mod:`bench.chord`: a no-op member and a summing callback, for each library."""

from __future__ import annotations

import os
from typing import Any

from django_redislock import task


@task(queue="bench-chord")
def member(i: int) -> int:
    return i


@task(queue="bench-chord")
def total(results: list[int]) -> int:
    return sum(results)


def celery_app(url: str) -> Any:
    """A Celery app on ``url`` (broker db 1, results db 2: chords need a result backend)."""
    from celery import Celery

    base = url.rsplit("/", 1)[0]
    app = Celery("bench_chord", broker=f"{base}/1", backend=f"{base}/2")
    app.conf.update(
        task_serializer="json",
        result_serializer="json",
        accept_content=["json"],
        broker_connection_retry_on_startup=True,
        worker_hijack_root_logger=False,
    )
    app.task(name="bench.chord.member")(celery_member)
    app.task(name="bench.chord.total")(celery_total)
    return app


def celery_member(i: int) -> int:
    return i


def celery_total(results: list[int]) -> int:
    return sum(results)


if os.environ.get("BENCH_CHORD_CELERY_URL"):  # the Celery worker's module (celery -A ...)
    app = celery_app(os.environ["BENCH_CHORD_CELERY_URL"])
