"""The I/O-bound task of :mod:`bench.workers` (sleep 10 ms), as each library declares it.

Imported by the benchmark (to enqueue) and by :mod:`bench.drain` in the worker process it
spawns (to run). django-redislock's tasks need Django set up first, so they are made by
:func:`redislock_tasks`, not at import. Every task notes the ``time.perf_counter()`` of the
first run that started (CLOCK_MONOTONIC on Linux: one clock for every process) in
:data:`MARKS`, or, for RQ whose runs happen in other processes, in Redis.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any

SLEEP = 0.010
#: "first": when the first run started; "done": how many runs ended (this process).
MARKS: dict[str, float] = {"done": 0}
_LOCK = threading.Lock()
#: Where RQ's runs (in WorkerPool's processes) note the first start.
RQ_FIRST_KEY = "bench:io:first"


def started() -> None:
    with _LOCK:
        MARKS.setdefault("first", time.perf_counter())


def ended() -> None:
    with _LOCK:
        MARKS["done"] += 1


def sleep_sync(i: int) -> None:
    """The thread pools' task (django-redislock, Huey, Celery, Dramatiq)."""
    started()
    time.sleep(SLEEP)
    ended()


async def sleep_async(i: int) -> None:
    """The ``async def`` task (django-redislock's async pool)."""
    started()
    await asyncio.sleep(SLEEP)
    ended()


async def arq_sleep(ctx: dict[str, Any], i: int) -> None:
    """arq's task (its functions take the worker's context first)."""
    started()
    await asyncio.sleep(SLEEP)
    ended()


def rq_sleep(i: int) -> None:
    """RQ's task, run in a WorkerPool process: the first start goes to Redis."""
    from rq import get_current_job

    job = get_current_job()
    if job is not None:
        job.connection.set(RQ_FIRST_KEY, repr(time.perf_counter()), nx=True)
    time.sleep(SLEEP)


def redislock_tasks() -> tuple[Any, Any]:
    """django-redislock's sync and async task on the ``bench`` alias (Django set up)."""
    from django_redislock import task
    from django_redislock.queue.registry import registry

    found = [registry.get(name) for name in ("bench.io.sleep", "bench.io.sleep_async")]
    if all(found):
        return found[0], found[1]
    sync = task(queue="io", using="bench", name="bench.io.sleep")(sleep_sync)
    asynchronous = task(queue="io", using="bench", name="bench.io.sleep_async")(sleep_async)
    return sync, asynchronous


def dramatiq_actor(
    url: str,
    fn: Callable[..., Any] = sleep_sync,
    name: str = "bench_io_sleep",
    queue: str = "io",
) -> Any:
    """Dramatiq's broker on ``url`` and its actor (an actor binds to the broker of its time).

    ``fn``, ``name`` and ``queue`` default to this module's task; :mod:`bench.pool` declares
    its no-op task the same way.
    """
    import dramatiq
    from dramatiq.brokers.redis import RedisBroker

    broker = RedisBroker(url=url)
    dramatiq.set_broker(broker)
    declare = dramatiq.actor(actor_name=name, queue_name=queue, max_retries=0)
    return declare(fn)


def huey_app(url: str) -> Any:
    from huey import RedisHuey

    app = RedisHuey("bench-io", url=url)
    return app, app.task(name="bench_io_sleep")(sleep_sync)


def celery_app(url: str) -> Any:
    from celery import Celery

    app = Celery("bench_io", broker=url)
    app.conf.update(
        task_ignore_result=True,
        broker_connection_retry_on_startup=True,
        worker_hijack_root_logger=False,
    )
    return app, app.task(name="bench.io.celery_sleep")(sleep_sync)
