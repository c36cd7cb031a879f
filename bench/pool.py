"""Process-pool benchmark: ``drain_queue --pool process --concurrency 2`` beside Huey's processes.

N no-op tasks are queued, then drained by two worker processes of each library, on
one private server in one run:

* django-redislock: the pool's own supervisor and children
  (:class:`~django_redislock.queue.supervisor.Supervisor`, ``run_child``), each child
  a burst ``Worker`` claiming 100 tasks per round trip; timed from the start of the
  supervisor until its last child exited (the children's start and exit included);
* Huey: its consumer with ``workers=2, worker_type="process"``; timed from its start
  until its queue is empty (its last two running tasks and its shutdown excluded).

Each library runs in a forked child of the benchmark process, so none shares a
connection or a warm cache with another; the passes alternate and the best of
:data:`ROUNDS` is kept (on a shared machine a single pass mostly measures the
neighbours).
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any, NoReturn

import redis
from django.test import override_settings

from bench.queue import fresh, in_child, redislock_noop
from django_redislock import queues
from django_redislock.queue.pool_child import run_child
from django_redislock.queue.supervisor import Supervisor
from django_redislock.queue.worker import Worker

CONCURRENCY = 2
ROUNDS = 5


def fill_redislock(n: int) -> None:
    redislock_noop.enqueue_many((((i,), {}) for i in range(n)), batch_size=1000)


def drain_redislock(n: int) -> tuple[float, int]:
    """Seconds the pool took to drain the queue, and the tasks it reported."""

    def make_worker(progress: Any) -> Worker:
        return Worker([queues["bench"].queue("bench")], batch=100, burst=True, progress=progress)

    def child_main(slot: int, pipes: tuple[int, int], close: list[int]) -> NoReturn:
        run_child(make_worker, pipes, close)

    start = time.perf_counter()
    outcome = Supervisor(child_main, {}, CONCURRENCY, burst=True).run()
    return time.perf_counter() - start, outcome.summary.processed


def huey_of(client: redis.Redis) -> Any:
    from huey import RedisHuey  # type: ignore[import-untyped]

    kwargs = client.connection_pool.connection_kwargs
    huey = RedisHuey("bench-pool", host=kwargs["host"], port=kwargs["port"])

    @huey.task(name="noop")
    def huey_noop(i: int) -> None:
        pass

    return huey, huey_noop


def fill_huey(client: redis.Redis, n: int) -> None:
    _, noop = huey_of(client)
    for i in range(n):
        noop(i)


def drain_huey(client: redis.Redis, n: int) -> tuple[float, int]:
    """Seconds Huey's two worker processes took to empty the queue."""
    huey, _ = huey_of(fresh(client))
    logging.getLogger("huey").setLevel(logging.WARNING)
    consumer = huey.create_consumer(
        workers=CONCURRENCY, worker_type="process", periodic=False, check_worker_health=False
    )
    start = time.perf_counter()
    consumer.start()
    while huey.pending_count():
        time.sleep(0.005)
    seconds = time.perf_counter() - start
    consumer.stop(graceful=True)
    return seconds, n


def one_pass(name: str, client: redis.Redis, n: int) -> float:
    """Tasks/s of one drain of ``n`` tasks by ``name``."""
    client.flushall()
    if name == "django-redislock":
        fill_redislock(n)
        seconds, done = in_child(lambda: drain_redislock(n))
        assert done == n, f"the pool reported {done} tasks of {n}"
    else:
        fill_huey(client, n)
        seconds, _ = in_child(lambda: drain_huey(client, n))
    return n / seconds


def run(server: Any, quick: bool) -> dict[str, Any]:
    n = 2000 if quick else 20000
    client = server.client()
    alias = {"bench": {"LOCATION": server.url, "KEY_PREFIX": "bench"}}
    passes: dict[str, list[float]] = {"django-redislock": [], "Huey": []}
    with override_settings(REDISLOCK_QUEUES=alias):
        for _ in range(ROUNDS):
            for name, rates in passes.items():
                rates.append(one_pass(name, client, n))
    rows = [
        {
            "library": name,
            "pool": f"{CONCURRENCY} processes",
            "drain/s": max(rates),
            "drain/s (median pass)": sorted(rates)[len(rates) // 2],
        }
        for name, rates in passes.items()
    ]
    ours, huey = rows[0], rows[1]
    return {
        "name": "pool",
        "columns": ["library", "pool", "drain/s", "drain/s (median pass)"],
        "rows": rows,
        "notes": [
            f"{n} no-op tasks drained by {CONCURRENCY} worker processes, {ROUNDS} alternating "
            f"passes; drain/s is the best pass. Load average at the end: "
            f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs (a shared machine: other "
            "jobs ran meanwhile, and the server shares the same CPUs).",
            "django-redislock: drain_queue --pool process --concurrency 2 --burst (its "
            "supervisor and children, timed until the last child exited); Huey: "
            "workers=2, worker_type='process' (timed until its queue was empty).",
            "every pass (tasks/s): "
            + "; ".join(
                f"{name}: {', '.join(f'{r:,.0f}' for r in rates)}" for name, rates in passes.items()
            ),
            f"process-pool drain vs Huey: {ours['drain/s'] / huey['drain/s']:.2f}x best, "
            f"{ours['drain/s (median pass)'] / huey['drain/s (median pass)']:.2f}x median "
            "(target >= 8x)",
        ],
    }
