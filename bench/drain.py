"""``python -m bench.drain LIBRARY URL N``: one library's worker drains N queued I/O tasks.

The worker process of :mod:`bench.workers`: a fresh interpreter (started by the benchmark,
which notes the time of the spawn) that imports the library, starts its worker with 32
at once, and prints ``{"first": ..., "end": ...}`` (``time.perf_counter()`` of the first
run's start and of the last run's end) as JSON on its last line. Nothing is imported
before the library's own start-up, so the time from the spawn is what a user's
``drain_queue`` / ``huey_consumer`` / ``dramatiq`` / ``arq`` command costs before it runs
tasks (the interpreter's own start included).
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import io_tasks  # after the path
from bench.io_tasks import MARKS

CONCURRENCY = 32
LIMIT = 120.0  # seconds: a drain that takes longer is reported as it stands


def wait_done(n: int) -> float:
    deadline = time.perf_counter() + LIMIT
    while MARKS["done"] < n and time.perf_counter() < deadline:
        time.sleep(0.001)
    return time.perf_counter()


def redislock(url: str, n: int, pool: str) -> float:
    os.environ["BENCH_QUEUE_URL"] = url
    os.environ["DJANGO_SETTINGS_MODULE"] = "bench.drain_settings"  # not the parent's
    import django

    django.setup()
    from django_redislock import queues
    from django_redislock.queue.worker import Worker

    io_tasks.redislock_tasks()
    worker = Worker([queues["bench"].queue("io")], pool=pool, concurrency=CONCURRENCY, burst=True)
    summary = worker.run()
    assert summary.succeeded == n, summary
    return time.perf_counter()


def huey(url: str, n: int) -> float:
    app, _ = io_tasks.huey_app(url)
    logging.getLogger("huey").setLevel(logging.WARNING)
    consumer = app.create_consumer(
        workers=CONCURRENCY, worker_type="thread", periodic=False, check_worker_health=False
    )
    consumer.start()
    end = wait_done(n)
    consumer.stop(graceful=True)
    return end


def dramatiq(url: str, n: int) -> float:
    from dramatiq import Worker

    actor = io_tasks.dramatiq_actor(url)
    logging.getLogger("dramatiq").setLevel(logging.WARNING)
    worker = Worker(actor.broker, worker_threads=CONCURRENCY)
    worker.start()
    end = wait_done(n)
    worker.stop()
    return end


def arq(url: str, n: int) -> float:
    from arq.connections import RedisSettings
    from arq.worker import Worker

    logging.getLogger("arq").setLevel(logging.WARNING)
    worker = Worker(
        functions=[io_tasks.arq_sleep],
        redis_settings=RedisSettings.from_dsn(url),
        max_jobs=CONCURRENCY,
        burst=True,
        handle_signals=False,
    )
    worker.run()
    return time.perf_counter()


def rq(url: str, n: int) -> float:
    import redis
    import rq as rq_module
    from rq.worker_pool import WorkerPool

    client = redis.Redis.from_url(url)
    pool = WorkerPool(
        ["io"], connection=client, num_workers=CONCURRENCY, worker_class=rq_module.SimpleWorker
    )
    pool.start(burst=True, logging_level="WARNING")
    end = time.perf_counter()
    first = client.get(io_tasks.RQ_FIRST_KEY)
    if first is not None:
        MARKS["first"] = float(first)
    return end


def celery(url: str, n: int) -> float:
    """Celery's worker blocks its thread for good: a watcher reports and ends the process."""
    app, _ = io_tasks.celery_app(url)

    def report() -> None:
        end = wait_done(n)
        line = json.dumps({"first": MARKS.get("first"), "end": end}) + "\n"
        os.write(1, line.encode())  # Celery's worker redirects sys.stdout to its logger
        os._exit(0)

    threading.Thread(target=report, daemon=True).start()
    app.Worker(
        pool="threads",
        concurrency=CONCURRENCY,
        loglevel="WARNING",
        without_heartbeat=True,
        without_mingle=True,
        without_gossip=True,
        quiet=True,
    ).start()
    return time.perf_counter()  # not reached


DRAINS: dict[str, Callable[[str, int], float]] = {
    "redislock-thread": lambda url, n: redislock(url, n, "thread"),
    "redislock-async": lambda url, n: redislock(url, n, "async"),
    "huey": huey,
    "dramatiq": dramatiq,
    "arq": arq,
    "rq": rq,
    "celery": celery,
}


def main(argv: list[str]) -> Any:
    name, url, n = argv[0], argv[1], int(argv[2])
    end = DRAINS[name](url, n)
    print(json.dumps({"first": MARKS.get("first"), "end": end}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
