"""``python -m bench.pickup_worker LIBRARY URL``: one idle worker for :mod:`bench.pickup`.

The worker process of the pickup-latency benchmark: it starts one library's worker on
the queue ``pickup`` (one run at a time, the library's usual idiom), prints ``ready``, and
runs until the benchmark ends it. Every task is ``note(t0)``: its first statement takes
``time.perf_counter() - t0`` (CLOCK_MONOTONIC on Linux: one clock for every process, so
``t0``, taken by the benchmark just before its enqueue call, is comparable) and pushes it to
the list :data:`DONE_KEY`, where the benchmark waits for it.

The task of each library is defined here, so the benchmark (which enqueues) and this
process (which runs) declare it alike.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from functools import cache
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

#: Where each run pushes its pickup latency (seconds, as text).
DONE_KEY = "bench:pickup:done"
QUEUE = "pickup"
#: The first queue of the two-queue worker (tasks go to the second, :data:`QUEUE`).
OTHER_QUEUE = "pickup-other"


@cache
def _client(url: str) -> Any:
    import redis

    return redis.Redis.from_url(url)


def note(t0: float) -> None:
    """The task of every library: the pickup latency, pushed for the benchmark."""
    latency = time.perf_counter() - t0
    _client(os.environ["BENCH_PICKUP_URL"]).rpush(DONE_KEY, repr(latency))


async def arq_note(ctx: dict[str, Any], t0: float) -> None:
    """arq's task (its functions take the worker's context first)."""
    note(t0)


def redislock_task() -> Any:
    """django-redislock's task on the ``bench`` alias (Django set up, the alias configured)."""
    from django_redislock import task
    from django_redislock.queue.registry import registry

    found = registry.get("bench.pickup.note")
    return found or task(queue=QUEUE, using="bench", name="bench.pickup.note")(note)


def huey_app(url: str) -> Any:
    from huey import RedisHuey

    app = RedisHuey("bench-pickup", url=url)
    return app, app.task(name="bench_pickup_note")(note)


@cache
def dramatiq_actor(url: str) -> Any:
    import dramatiq
    from dramatiq.brokers.redis import RedisBroker

    broker = RedisBroker(url=url)
    dramatiq.set_broker(broker)
    declare = dramatiq.actor(actor_name="bench_pickup_note", queue_name=QUEUE, max_retries=0)
    return declare(note)


def redislock(url: str, pool: str, queues: list[str]) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
    import django

    django.setup()
    from django.test import override_settings

    from django_redislock import queues as handlers
    from django_redislock.queue.worker import Worker

    alias = {"bench": {"LOCATION": url, "KEY_PREFIX": "bench"}}
    with override_settings(REDISLOCK_QUEUES=alias):
        redislock_task()
        backend = handlers["bench"]
        concurrency = 4 if pool == "thread" else None
        chosen = [backend.queue(name) for name in queues]
        worker = Worker(chosen, pool=pool, concurrency=concurrency)
        print("ready", flush=True)
        with worker.signal_handlers():
            worker.run()


def huey(url: str) -> None:
    app, _ = huey_app(url)
    logging.getLogger("huey").setLevel(logging.WARNING)
    consumer = app.create_consumer(
        workers=1, worker_type="thread", periodic=False, check_worker_health=False
    )
    consumer.start()
    print("ready", flush=True)
    threading.Event().wait()  # until the benchmark ends the process


def dramatiq(url: str) -> None:
    from dramatiq import Worker

    actor = dramatiq_actor(url)
    logging.getLogger("dramatiq").setLevel(logging.WARNING)
    Worker(actor.broker, worker_threads=1).start()
    print("ready", flush=True)
    threading.Event().wait()


def arq(url: str) -> None:
    from arq.connections import RedisSettings
    from arq.worker import Worker

    logging.getLogger("arq").setLevel(logging.WARNING)
    worker = Worker(
        functions=[arq_note],
        redis_settings=RedisSettings.from_dsn(url),
        max_jobs=1,
        handle_signals=False,
        queue_name=QUEUE,
    )
    print("ready", flush=True)
    worker.run()  # on the loop the Worker was built with (it starts its jobs there)


WORKERS = {
    "redislock-solo": lambda url: redislock(url, "solo", [QUEUE]),
    "redislock-thread": lambda url: redislock(url, "thread", [QUEUE]),
    "redislock-two-queues": lambda url: redislock(url, "solo", [OTHER_QUEUE, QUEUE]),
    "huey": huey,
    "dramatiq": dramatiq,
    "arq": arq,
}


def main(argv: list[str]) -> None:
    name, url = argv[0], argv[1]
    os.environ["BENCH_PICKUP_URL"] = url
    WORKERS[name](url)


if __name__ == "__main__":
    # through the module's own name: the tasks are declared as the benchmark declares them
    from bench import pickup_worker  # noqa: PLW0406

    pickup_worker.main(sys.argv[1:])
