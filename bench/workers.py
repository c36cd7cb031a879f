"""I/O-bound worker benchmark: N tasks that sleep 10 ms, 32 at once, per library.

On one private server in one run, each library drains the same number of tasks that
each sleep 10 ms:

* django-redislock: ``Worker(pool="thread", concurrency=32)`` (``drain_queue --pool
  thread --concurrency 32``), in a forked child;
* Huey: its consumer with 32 worker threads (``huey_consumer -w 32 -k thread``), in a
  forked child;
* RQ: its ``WorkerPool`` of 32 ``SimpleWorker`` processes in burst mode (RQ has no
  threads; each worker is a process);
* Celery: its threads pool with 32 threads and a Redis broker, results off.

The ideal is ``N x 10 ms / 32``; the table shows tasks/s, the share of that ideal and the
ratio to the fastest peer. The machine is usually shared (2 cores, other test runs), so
the numbers are indicative.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import threading
import time
from typing import Any

import redis
from django.test import override_settings

from bench.common import round_trips
from django_redislock import queues, task
from django_redislock.queue.worker import Worker

SLEEP = 0.010
CONCURRENCY = 32
#: Huey counts its completions here (its consumer's threads run in the child process).
DONE: dict[str, int] = {"huey": 0}


def sleep_10ms(i: int) -> None:
    """The task every library runs."""
    time.sleep(SLEEP)


redislock_sleep = task(queue="io", using="bench", name="bench.workers.redislock_sleep")(sleep_10ms)


def in_child(fn: Any) -> Any:
    """Run ``fn`` in a forked process and return what it returns."""
    ctx = multiprocessing.get_context("fork")
    parent, child = ctx.Pipe()

    def target() -> None:
        child.send(fn())

    process = ctx.Process(target=target)
    process.start()
    result = parent.recv()
    process.join(120)
    return result


def redislock(client: redis.Redis, n: int) -> tuple[float, float]:
    """(seconds, round trips per task) of a thread-pool drain of ``n`` tasks."""
    redislock_sleep.enqueue_many((((i,), {}) for i in range(n)), batch_size=1000)

    def drain() -> tuple[float, float]:
        worker = Worker(
            [queues["bench"].queue("io")], pool="thread", concurrency=CONCURRENCY, burst=True
        )
        with round_trips() as counter:
            start = time.perf_counter()
            summary = worker.run()
            seconds = time.perf_counter() - start
        assert summary.succeeded == n, summary
        return seconds, counter[0] / n

    result: tuple[float, float] = in_child(drain)
    return result


def huey(client: redis.Redis, n: int) -> tuple[float, float]:
    from huey import RedisHuey  # type: ignore[import-untyped]

    kwargs = client.connection_pool.connection_kwargs
    app = RedisHuey("bench-io", host=kwargs["host"], port=kwargs["port"])

    @app.task()
    def huey_sleep(i: int) -> None:
        time.sleep(SLEEP)
        DONE["huey"] += 1

    for i in range(n):
        huey_sleep(i)

    def drain() -> tuple[float, float]:
        logging.getLogger("huey").setLevel(logging.WARNING)
        consumer = app.create_consumer(
            workers=CONCURRENCY, worker_type="thread", periodic=False, check_worker_health=False
        )
        start = time.perf_counter()
        consumer.start()
        deadline = start + 120
        while DONE["huey"] < n and time.perf_counter() < deadline:
            time.sleep(0.001)
        seconds = time.perf_counter() - start
        consumer.stop(graceful=True)
        return seconds, float("nan")

    result: tuple[float, float] = in_child(drain)
    return result


def rq_pool(client: redis.Redis, n: int) -> tuple[float, float]:
    import rq
    from rq.worker_pool import WorkerPool

    queue = rq.Queue("io", connection=client)
    for start in range(0, n, 1000):
        queue.enqueue_many(
            [rq.Queue.prepare_data(sleep_10ms, (i,)) for i in range(start, min(start + 1000, n))]
        )

    def drain() -> tuple[float, float]:
        local = redis.Redis(
            **{k: client.connection_pool.connection_kwargs[k] for k in ("host", "port")}
        )
        pool = WorkerPool(
            ["io"], connection=local, num_workers=CONCURRENCY, worker_class=rq.SimpleWorker
        )
        start = time.perf_counter()
        pool.start(burst=True, logging_level="WARNING")
        return time.perf_counter() - start, float("nan")

    result: tuple[float, float] = in_child(drain)
    return result


def celery_threads(client: redis.Redis, n: int) -> tuple[float, float]:
    """Celery's threads pool (``-P threads -c 32``), Redis broker, no results.

    Timed from its first task's start: Celery's own start-up (bootsteps, broker
    connection) takes about a second and is left out, to its advantage.
    """
    from celery import Celery

    kwargs = client.connection_pool.connection_kwargs
    app = Celery("bench_io", broker=f"redis://{kwargs['host']}:{kwargs['port']}/0")
    app.conf.update(
        task_ignore_result=True,
        broker_connection_retry_on_startup=True,
        worker_hijack_root_logger=False,
    )
    marks: dict[str, float] = {}
    lock = threading.Lock()

    @app.task(name="bench.workers.celery_sleep")
    def celery_sleep(i: int) -> None:
        with lock:
            marks.setdefault("first", time.perf_counter())
        time.sleep(SLEEP)
        with lock:
            marks["done"] = marks.get("done", 0) + 1
            if marks["done"] == n:
                marks["last"] = time.perf_counter()

    for i in range(n):
        celery_sleep.delay(i)

    def drain() -> tuple[float, float]:
        ctx = multiprocessing.get_context("fork")
        parent, child = ctx.Pipe()

        def report() -> None:
            deadline = time.perf_counter() + 120
            while "last" not in marks and time.perf_counter() < deadline:
                time.sleep(0.005)
            child.send((marks.get("last", deadline) - marks.get("first", 0.0), float("nan")))
            os._exit(0)

        def target() -> None:
            threading.Thread(target=report, daemon=True).start()
            worker = app.Worker(
                pool="threads",
                concurrency=CONCURRENCY,
                loglevel="WARNING",
                without_heartbeat=True,
                without_mingle=True,
                without_gossip=True,
                quiet=True,
            )
            worker.start()

        process = ctx.Process(target=target)
        process.start()
        result: tuple[float, float] = parent.recv()
        process.join(30)
        if process.is_alive():
            process.kill()
        return result

    return drain()


LIBRARIES = {
    "django-redislock (--pool thread --concurrency 32)": redislock,
    "Huey (-w 32 -k thread)": huey,
    "RQ (WorkerPool, 32 SimpleWorkers)": rq_pool,
    "Celery (-P threads -c 32, Redis broker)": celery_threads,
}
COLUMNS = ["library", "tasks/s", "share of ideal", "vs fastest peer", "round trips/task"]


def run(server: Any, quick: bool) -> dict[str, Any]:
    n = 500 if quick else 2000
    client = server.client()
    alias = {"bench": {"LOCATION": server.url, "KEY_PREFIX": "bench"}}
    ideal = n / (n * SLEEP / CONCURRENCY)
    rows = []
    with override_settings(REDISLOCK_QUEUES=alias):
        for name, measure in LIBRARIES.items():
            client.flushall()
            seconds, trips = measure(client, n)
            rows.append(
                {
                    "library": name,
                    "tasks/s": n / seconds,
                    "share of ideal": f"{n / seconds / ideal:.0%}",
                    "round trips/task": trips,
                }
            )
    peers = [row["tasks/s"] for row in rows[1:]]
    best = max(peers) if peers else float("nan")
    for row in rows:
        row["vs fastest peer"] = f"{row['tasks/s'] / best:.2f}x"
    return {
        "name": "workers",
        "columns": COLUMNS,
        "rows": rows,
        "notes": [
            f"{n} tasks that sleep {SLEEP * 1000:.0f} ms, {CONCURRENCY} at once; ideal "
            f"{ideal:,.0f} tasks/s ({n} x {SLEEP * 1000:.0f} ms / {CONCURRENCY}). Load average "
            f"at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs (a shared machine).",
            "Celery is timed from its first task's start (its start-up left out); Dramatiq "
            "is not installed here.",
        ],
    }
