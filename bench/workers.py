"""I/O-bound worker benchmark: N tasks that sleep 10 ms, 32 at once, per library.

On one private server, each library's worker drains the same N tasks that each sleep
10 ms, 32 at once, in the library's own idiom:

* django-redislock: ``Worker(pool="thread", concurrency=32)`` (``drain_queue --pool thread
  --concurrency 32``) with a sync task, and ``pool="async"`` with an ``async def`` task;
* Huey: its consumer with 32 worker threads (``huey_consumer -w 32 -k thread``);
* Dramatiq: its ``Worker`` with 32 threads and the Redis broker (``dramatiq -t 32``);
* arq: its ``Worker`` with ``max_jobs=32`` and an ``async def`` task (burst);
* RQ: its ``WorkerPool`` of 32 ``SimpleWorker`` processes in burst mode (RQ has no threads);
* Celery: its threads pool with 32 threads and a Redis broker, results off.

Each drain runs in a worker process spawned for it (``python -m bench.drain``, a fresh
interpreter: imports, ``django.setup()`` and the library's start-up included), and is timed
twice: from the spawn (what a freshly started worker delivers) and from the start of its
first task (the steady drain). The libraries take turns in each of :data:`ROUNDS` rounds (the
order rotates), and every figure is the median of the rounds with their range; "vs fastest
peer" is the median of the per-round ratios. The machine is usually shared (2 cores, other
test runs): the load average is in the notes.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import redis
from django.test import override_settings

from bench import io_tasks

ROOT = Path(__file__).resolve().parent.parent
SLEEP = io_tasks.SLEEP
CONCURRENCY = 32
ROUNDS = 3


def fill_redislock(url: str, n: int, which: int) -> None:
    fn = io_tasks.redislock_tasks()[which]
    fn.enqueue_many((((i,), {}) for i in range(n)), batch_size=1000)


def fill_huey(url: str, n: int) -> None:
    _, fn = io_tasks.huey_app(url)
    for i in range(n):
        fn(i)


def fill_dramatiq(url: str, n: int) -> None:
    actor = io_tasks.dramatiq_actor(url)
    for i in range(n):
        actor.send(i)


def fill_arq(url: str, n: int, function: str = "arq_sleep") -> None:
    """Queue ``n`` jobs of arq's ``function`` (this benchmark's sleep unless told)."""
    from arq import create_pool
    from arq.connections import RedisSettings

    async def fill() -> None:
        pool = await create_pool(RedisSettings.from_dsn(url))
        for i in range(n):
            await pool.enqueue_job(function, i)
        await pool.aclose()

    asyncio.run(fill())


def fill_rq(url: str, n: int) -> None:
    import rq

    queue = rq.Queue("io", connection=redis.Redis.from_url(url))
    for start in range(0, n, 1000):
        queue.enqueue_many(
            [
                rq.Queue.prepare_data(io_tasks.rq_sleep, (i,))
                for i in range(start, min(start + 1000, n))
            ]
        )


def fill_celery(url: str, n: int) -> None:
    _, fn = io_tasks.celery_app(url)
    for i in range(n):
        fn.delay(i)


#: row name -> (``bench.drain`` name, how the benchmark queues the N tasks)
LIBRARIES: dict[str, tuple[str, Callable[[str, int], None]]] = {
    "django-redislock (--pool thread -c 32)": (
        "redislock-thread",
        lambda url, n: fill_redislock(url, n, 0),
    ),
    "django-redislock (--pool async -c 32, async def)": (
        "redislock-async",
        lambda url, n: fill_redislock(url, n, 1),
    ),
    "Huey (-w 32 -k thread)": ("huey", fill_huey),
    "Dramatiq (-t 32, Redis broker)": ("dramatiq", fill_dramatiq),
    "arq (max_jobs=32, async def)": ("arq", fill_arq),
    "RQ (WorkerPool, 32 SimpleWorkers)": ("rq", fill_rq),
    "Celery (-P threads -c 32, Redis broker)": ("celery", fill_celery),
}
OURS = [name for name in LIBRARIES if name.startswith("django-redislock")]
COLUMNS = [
    "library",
    "tasks/s from spawn",
    "range (spawn)",
    "tasks/s from first task",
    "range (first task)",
    "start-up s",
    "vs fastest peer (spawn)",
    "vs fastest peer (first task)",
]


def drain(name: str, url: str, n: int) -> tuple[float, float]:
    """(seconds from the spawn, seconds from the first task) of one drain in a new process."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    spawned = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "bench.drain", name, url, str(n)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"bench.drain {name} failed: {done.stderr[-2000:]}")
    marks = json.loads(lines[-1])
    first = marks["first"] if marks["first"] is not None else float("nan")
    return marks["end"] - spawned, marks["end"] - first


def run(server: Any, quick: bool) -> dict[str, Any]:
    n = 500 if quick else 2000
    rounds = 1 if quick else ROUNDS
    url = server.url
    client = server.client()
    alias = {"bench": {"LOCATION": url, "KEY_PREFIX": "bench"}}
    ideal = CONCURRENCY / SLEEP
    spawn: dict[str, list[float]] = {name: [] for name in LIBRARIES}
    first: dict[str, list[float]] = {name: [] for name in LIBRARIES}
    loads = []
    names = list(LIBRARIES)
    with override_settings(REDISLOCK_QUEUES=alias):
        for turn in range(rounds):
            for name in names[turn:] + names[:turn]:
                client.flushall()
                drain_name, fill = LIBRARIES[name]
                fill(url, n)
                from_spawn, from_first = drain(drain_name, url, n)
                spawn[name].append(n / from_spawn)
                first[name].append(n / from_first)
                loads.append(os.getloadavg()[0])
    peers = [name for name in LIBRARIES if name not in OURS]

    def versus(rates: dict[str, list[float]], name: str) -> str:
        ratios = [rates[name][i] / max(rates[peer][i] for peer in peers) for i in range(rounds)]
        return f"{statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f})"

    rows = []
    for name in LIBRARIES:
        rows.append(
            {
                "library": name,
                "tasks/s from spawn": statistics.median(spawn[name]),
                "range (spawn)": f"{min(spawn[name]):,.0f}-{max(spawn[name]):,.0f}",
                "tasks/s from first task": statistics.median(first[name]),
                "range (first task)": f"{min(first[name]):,.0f}-{max(first[name]):,.0f}",
                "start-up s": statistics.median(
                    n / s - n / f for s, f in zip(spawn[name], first[name], strict=True)
                ),
                "vs fastest peer (spawn)": versus(spawn, name),
                "vs fastest peer (first task)": versus(first, name),
            }
        )
    return {
        "name": "workers",
        "columns": COLUMNS,
        "rows": rows,
        "notes": [
            f"{n} tasks that sleep {SLEEP * 1000:.0f} ms, {CONCURRENCY} at once; ideal "
            f"{ideal:,.0f} tasks/s. Median of {rounds} interleaved rounds (the order rotates "
            f"each round), range beside it. Load average during the run: median "
            f"{statistics.median(loads):.1f}, {min(loads):.1f}-{max(loads):.1f}, on "
            f"{os.cpu_count()} CPUs (a shared machine).",
            "Reproduce: python3 dev.py bench workers. Each worker is a new process "
            "(python -m bench.drain): 'from spawn' includes the interpreter, the imports, "
            "django.setup() (bench/drain_settings.py: the test suite's settings) and the worker's "
            "start; 'from first task' starts "
            "at the first run. 'start-up s' is the difference.",
            "async pool vs thread pool (from first task, median of per-round ratios): "
            + async_ratio(first, rounds),
        ],
    }


def async_ratio(first: dict[str, list[float]], rounds: int) -> str:
    thread, asynchronous = first[OURS[0]], first[OURS[1]]
    ratios = [asynchronous[i] / thread[i] for i in range(rounds)]
    return f"{statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f}; target >= 1.0x)"
