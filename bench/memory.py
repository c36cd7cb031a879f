"""Memory per queued task: django-redislock beside Huey, arq, RQ, Dramatiq and Celery.

Each library queues N tasks (100,000; ``--quick``: 10,000) that call a no-op function with
one 100-character string argument, on one private server that holds nothing else
(``FLUSHALL`` first). The figure is ``INFO memory``'s ``used_memory`` after minus before,
divided by N: every byte the library's layout costs the server per waiting task (keys,
hash-table entries and buckets, skiplist nodes, the stored message).

For django-redislock the run also splits the figure per key (``MEMORY USAGE key SAMPLES 0``
divided by N, the exact walk), which is how docs/queue.md's per-structure table is
reproduced. The libraries take turns in a rotating order, ``ROUNDS`` rounds; every library
fills its queue in a forked child, so no connection, registry or broker setting leaks from
one to the next. Memory does not depend on the machine's load: the rounds agree to the byte
but for the allocator's rounding.

Reproduce: ``python3 dev.py bench memory``.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
from collections.abc import Callable
from typing import Any

import redis
from django.test import override_settings

from bench.common import median
from django_redislock import queues, task

#: Tasks queued per library and round, and the size of their one argument.
N, ARG = 100_000, 100
ROUNDS = 3
CHUNK = 1000


def noop(*args: Any, **kwargs: Any) -> None:
    """The task every library queues (it never runs here)."""


redislock_noop = task(queue="bench", using="bench", name="bench.memory.noop")(noop)


def argument(i: int) -> str:
    """A distinct 100-character argument (the task's data)."""
    return f"{i:08d}".ljust(ARG, "x")


def fill_redislock(port: int, n: int) -> None:
    for start in range(0, n, CHUNK):
        calls: list[tuple[tuple[str], dict[str, Any]]] = [
            ((argument(i),), {}) for i in range(start, min(start + CHUNK, n))
        ]
        redislock_noop.enqueue_many(calls, batch_size=CHUNK)


def fill_huey(port: int, n: int) -> None:
    from huey import RedisHuey

    huey = RedisHuey("bench", host="127.0.0.1", port=port)

    @huey.task()
    def huey_noop(arg: str) -> None:
        pass

    for i in range(n):
        huey_noop(argument(i))


def fill_rq(port: int, n: int) -> None:
    import rq

    queue = rq.Queue("bench", connection=redis.Redis(port=port))
    for start in range(0, n, CHUNK):
        data = [
            rq.Queue.prepare_data(noop, (argument(i),)) for i in range(start, min(start + CHUNK, n))
        ]
        queue.enqueue_many(data)


def fill_arq(port: int, n: int) -> None:
    from arq import create_pool
    from arq.connections import RedisSettings

    async def main() -> None:
        pool = await create_pool(RedisSettings(host="127.0.0.1", port=port))
        for start in range(0, n, 50):  # arq's pool holds 50 connections at most
            await asyncio.gather(
                *(pool.enqueue_job("noop", argument(i)) for i in range(start, min(start + 50, n)))
            )
        await pool.aclose()

    asyncio.run(main())


def fill_dramatiq(port: int, n: int) -> None:
    import dramatiq
    from dramatiq.brokers.redis import RedisBroker

    broker = RedisBroker(host="127.0.0.1", port=port)
    dramatiq.set_broker(broker)
    actor = dramatiq.actor(actor_name="noop", queue_name="bench")(noop)
    for i in range(n):
        actor.send(argument(i))


def fill_celery(port: int, n: int) -> None:
    from celery import Celery

    app = Celery("bench", broker=f"redis://127.0.0.1:{port}/0")
    with app.producer_or_acquire() as producer:
        for i in range(n):
            app.send_task("bench.noop", args=[argument(i)], producer=producer)


#: library -> (fill, share of N it queues: the slow clients queue fewer, per task all the same)
FILLS: dict[str, tuple[Callable[[int, int], None], int]] = {
    "django-redislock": (fill_redislock, 1),
    "Huey": (fill_huey, 1),
    "arq": (fill_arq, 1),
    "RQ": (fill_rq, 1),
    "Dramatiq": (fill_dramatiq, 2),
    "Celery": (fill_celery, 5),
}


def in_child(fill: Callable[[int, int], None], port: int, n: int) -> None:
    ctx = multiprocessing.get_context("fork")
    process = ctx.Process(target=fill, args=(port, n))
    process.start()
    process.join(900)
    if process.exitcode != 0:
        raise RuntimeError(f"{fill.__name__} failed (exit code {process.exitcode})")


def used(client: redis.Redis) -> int:
    return int(client.info("memory")["used_memory"])


def measure(client: redis.Redis, port: int, name: str, n: int) -> tuple[float, dict[str, float]]:
    """Bytes per task of ``name`` queuing ``n`` tasks, and per key (ours only)."""
    client.flushall()
    before = used(client)
    fill, _ = FILLS[name]
    in_child(fill, port, n)
    delta = used(client) - before
    keys: dict[str, float] = {}
    if name == "django-redislock":
        for key in client.scan_iter(count=1000):
            size = client.memory_usage(key, samples=0) or 0
            keys[key.decode().rsplit(":", 1)[-1]] = size / n
    client.flushall()
    return delta / n, keys


def run(server: Any, quick: bool) -> dict[str, Any]:
    n = 10_000 if quick else N
    client = server.client(socket_timeout=60)
    alias = {
        "bench": {
            "LOCATION": server.url,
            "KEY_PREFIX": "bench",
            "OPTIONS": {"COMMIT_MODE": "immediate"},
        }
    }
    names = list(FILLS)
    found: dict[str, list[float]] = {name: [] for name in names}
    per_key: dict[str, list[float]] = {}
    loads = []
    with override_settings(REDISLOCK_QUEUES=alias):
        queues["bench"].queue("bench")
        for turn in range(ROUNDS):
            for name in names[turn:] + names[:turn]:
                count = n // FILLS[name][1]
                per_task, keys = measure(client, server.port, name, count)
                found[name].append(per_task)
                for key, size in keys.items():
                    per_key.setdefault(key, []).append(size)
            loads.append(os.getloadavg()[0])
    rows = [
        {
            "library": name,
            "bytes/task": median(found[name]),
            "range": f"{min(found[name]):,.1f}-{max(found[name]):,.1f}",
            "tasks": n // FILLS[name][1],
        }
        for name in names
    ]
    ours = ", ".join(f"{key} {median(sizes):.1f} B" for key, sizes in sorted(per_key.items()))
    huey = median(found["Huey"])
    return {
        "name": "memory",
        "columns": ["library", "bytes/task", "range", "tasks"],
        "plots": ["bytes/task"],
        "rows": rows,
        "notes": [
            f"used_memory after minus before, per queued task; median of {ROUNDS} rounds "
            f"(libraries in a rotating order), each task one call with a {ARG}-character "
            f"string argument; the slow clients (Dramatiq, Celery) queue a share of the "
            f"{n:,} tasks. Load average at the end of each round: "
            f"{', '.join(f'{load:.1f}' for load in loads)} on {os.cpu_count()} CPUs "
            "(memory does not depend on it). Reproduce: python3 dev.py bench memory.",
            f"django-redislock per key (MEMORY USAGE SAMPLES 0 / tasks): {ours}.",
            f"django-redislock vs Huey: {median(found['django-redislock']) / huey:.2f}x "
            "(target <= 300 B per task).",
        ],
    }
