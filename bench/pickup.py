"""Pickup latency: from the enqueue call to the task's first statement, worker idle.

One worker process per library (``python -m bench.pickup_worker``, one run at a time,
the library's usual idiom) waits on an empty queue; the benchmark takes ``t0`` just before
its enqueue call, the task takes ``perf_counter() - t0`` as it starts (one clock for every
process) and pushes it to a list the benchmark waits on. Before each enqueue the worker is
idle again: for the libraries that block on Redis (django-redislock, Huey) the benchmark
waits until the server counts a blocked client (``INFO clients``), so every sample starts
from a worker already in its wait; Dramatiq and arq poll, so their samples start after a
random idle gap of 0-1 s (their latency is their poll interval, whatever this benchmark does).

Rows: django-redislock's ``drain_queue`` (solo) and ``--pool thread``, whose claim rides on
the wait (one round trip), and a worker of two queues with the task on the second, whose
wake-up still needs its own claim (two round trips: the path every idle pickup took before);
Huey's consumer (one thread: ``BRPOP`` returns the task); Dramatiq (one thread) and arq
(``max_jobs=1``). Only one worker runs at a time; the libraries take turns in each of
:data:`ROUNDS` rounds (the order rotates), and each figure is the median of the rounds'
p50 (p90) with their range; "p50 vs Huey" is the median of the per-round ratios.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from django.test import override_settings

from bench import pickup_worker
from bench.common import percentile
from bench.pickup_worker import DONE_KEY

ROOT = Path(__file__).resolve().parent.parent
ROUNDS = 3
#: Samples per round of a library that blocks, and of one that polls (each costs ~0.75 s).
SAMPLES, POLLED_SAMPLES = 200, 12
#: Samples dropped at the start of each turn (connections, script loads, first imports).
WARM_UP = 5
HUEY = "Huey (consumer, 1 thread: BRPOP)"


class Producer:
    """The enqueue call of each library, made the way its users make it."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._loop: asyncio.AbstractEventLoop | None = None
        self._arq: Any = None

    def redislock(self) -> Callable[[float], Any]:
        return pickup_worker.redislock_task().delay

    def redislock_second_queue(self) -> Callable[[float], Any]:
        return self.redislock()

    def huey(self) -> Callable[[float], Any]:
        _, fn = pickup_worker.huey_app(self.url)
        return fn

    def dramatiq(self) -> Callable[[float], Any]:
        return pickup_worker.dramatiq_actor(self.url).send

    def arq(self) -> Callable[[float], Any]:
        from arq import create_pool
        from arq.connections import RedisSettings

        if self._loop is None:
            self._loop = asyncio.new_event_loop()
            settings = RedisSettings.from_dsn(self.url)
            self._arq = self._loop.run_until_complete(create_pool(settings))
        loop, pool = self._loop, self._arq

        def enqueue(t0: float) -> Any:
            return loop.run_until_complete(
                pool.enqueue_job("arq_note", t0, _queue_name=pickup_worker.QUEUE)
            )

        return enqueue

    def close(self) -> None:
        if self._loop is not None:
            self._loop.run_until_complete(self._arq.aclose())
            self._loop.close()


#: row -> (worker name, the producer's enqueue, blocks on Redis while idle)
LIBRARIES: dict[str, tuple[str, Callable[[Producer], Callable[[float], Any]], bool]] = {
    "django-redislock (drain_queue, solo)": ("redislock-solo", Producer.redislock, True),
    "django-redislock (--pool thread -c 4)": ("redislock-thread", Producer.redislock, True),
    "django-redislock, task on the 2nd of 2 queues": (
        "redislock-two-queues",
        Producer.redislock_second_queue,
        True,
    ),
    HUEY: ("huey", Producer.huey, True),
    "Dramatiq (1 thread, Redis broker: polls)": ("dramatiq", Producer.dramatiq, False),
    "arq (max_jobs=1: polls)": ("arq", Producer.arq, False),
}
COLUMNS = ["library", "p50 ms", "range (p50)", "p90 ms", "range (p90)", "p50 vs Huey", "samples"]


@contextlib.contextmanager
def worker(name: str, url: str) -> Iterator[subprocess.Popen[str]]:
    """A worker process of ``name``, ready; ended (by its pid) when the block ends."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench.pickup_worker", name, url],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stdout is not None
        if proc.stdout.readline().strip() != "ready":
            raise RuntimeError(f"bench.pickup_worker {name} did not start")
        yield proc
    finally:
        proc.terminate()  # django-redislock stops on SIGTERM; a peer that does not is killed
        try:
            proc.wait(3)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def wait_blocked(client: Any, deadline: float) -> None:
    """Until the server counts a blocked client (the idle worker's wait), at most 5 s."""
    while int(client.info("clients")["blocked_clients"]) < 1 and time.monotonic() < deadline:
        time.sleep(0.0005)


def sample(client: Any, enqueue: Callable[[float], Any], blocks: bool, count: int) -> list[float]:
    """``count`` pickup latencies (seconds), each from an idle worker."""
    found = []
    for n in range(WARM_UP + count):
        if blocks:
            wait_blocked(client, time.monotonic() + 5)
        else:
            time.sleep(random.uniform(0.0, 1.0))
        t0 = time.perf_counter()
        enqueue(t0)
        done = client.blpop([DONE_KEY], timeout=10)  # the client's socket timeout is above it
        if done is None:
            raise RuntimeError(f"a task did not run within 10 s ({enqueue!r})")
        if n >= WARM_UP:
            found.append(float(done[1]))
    return found


def run(server: Any, quick: bool) -> dict[str, Any]:
    rounds = 1 if quick else ROUNDS
    url = server.url
    client = server.client(socket_timeout=15.0)
    client.flushall()
    producer = Producer(url)
    names = list(LIBRARIES)
    p50: dict[str, list[float]] = {name: [] for name in names}
    p90: dict[str, list[float]] = {name: [] for name in names}
    counts = dict.fromkeys(names, 0)
    loads = [os.getloadavg()[0]]
    alias = {"bench": {"LOCATION": url, "KEY_PREFIX": "bench"}}
    try:
        with override_settings(REDISLOCK_QUEUES=alias):
            for turn in range(rounds):
                for name in names[turn % len(names) :] + names[: turn % len(names)]:
                    worker_name, make, blocks = LIBRARIES[name]
                    count = SAMPLES if blocks else POLLED_SAMPLES
                    count = max(count // 8, 3) if quick else count
                    with worker(worker_name, url):
                        found = sample(client, make(producer), blocks, count)
                    p50[name].append(percentile(found, 50) * 1000)
                    p90[name].append(percentile(found, 90) * 1000)
                    counts[name] += len(found)
                    loads.append(os.getloadavg()[0])
    finally:
        producer.close()

    def versus(name: str) -> str:
        ratios = [p50[name][i] / p50[HUEY][i] for i in range(rounds)]
        return f"{statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f})"

    rows = [
        {
            "library": name,
            "p50 ms": statistics.median(p50[name]),
            "range (p50)": f"{min(p50[name]):.2f}-{max(p50[name]):.2f}",
            "p90 ms": statistics.median(p90[name]),
            "range (p90)": f"{min(p90[name]):.2f}-{max(p90[name]):.2f}",
            "p50 vs Huey": versus(name),
            "samples": counts[name],
        }
        for name in names
    ]
    return {
        "name": "pickup",
        "columns": COLUMNS,
        "plots": ["p50 ms", "p90 ms"],
        "rows": rows,
        "notes": [
            "Reproduce: python3 dev.py bench pickup. Enqueue call to the task's first "
            "statement, the worker idle in its wait (blocking libraries) or after a random "
            "0-1 s idle gap (pollers), one sample at a time; the enqueue call's own time is "
            "included. Idioms: task.delay(...) and drain_queue (django-redislock), calling "
            "the @huey.task function and huey_consumer -w 1 -k thread, actor.send(...) and "
            "dramatiq -t 1, enqueue_job(...) and an arq Worker with max_jobs=1.",
            f"Median of {rounds} interleaved rounds (one worker process at a time, the order "
            "rotating each round), range beside it; 'p50 vs Huey' is the median of the "
            f"per-round ratios (lower is faster). Load average during the run: median "
            f"{statistics.median(loads):.1f}, {min(loads):.1f}-{max(loads):.1f}, on "
            f"{os.cpu_count()} CPUs.",
            "The 2-queue row is a worker of two queues on one server with the task on the "
            "second: its wake-up carries the first queue's claim, so the second queue's "
            "needs a round trip of its own (wake-up, then claim: what every idle pickup "
            "cost before the claim rode on the wait).",
        ],
    }
