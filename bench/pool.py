"""Process-pool benchmark: ``drain_queue --pool process --concurrency 2`` beside Huey's processes.

N no-op tasks are queued, then drained by two worker processes of each library, on
one private server in one run:

* django-redislock: the pool's own supervisor and children
  (:class:`~django_redislock.queue.supervisor.Supervisor`, ``run_child``), each child
  a burst ``Worker`` claiming what ``drain_queue`` gives it without ``--batch``: its
  share of the default batch, ceil(100 / concurrency) tasks per round trip;
* Huey: its consumer with ``workers=2, worker_type="process"``.

Both are timed the same way, by the benchmark process: from the moment the library's
run begins (its forks and its workers' start included) until the benchmark, polling
the server every :data:`POLL` s, sees the queue drained: for django-redislock nothing
ready, delayed or in flight (every run acknowledged), for Huey nothing pending (its
workers take one task at a time, so at most its last two no-op runs are still
finishing). Neither library's shutdown is timed (Huey stops after it, and our
children exit after their last acknowledgement); how long the pool took until its
last child exited is reported beside it.

Each library runs in a forked child of the benchmark process, so none shares a
connection or a warm cache with another. The libraries take turns in each of
:data:`ROUNDS` rounds (the order rotates); every figure is the median of the rounds with
their range, the ratio is the median of the per-round ratios, and the load average is
noted after every pass (the best pass is kept beside the median, for the older tables).
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NoReturn

import redis
from django.test import override_settings

from bench.queue import fresh, redislock_noop
from django_redislock import queues
from django_redislock.management.commands._pool import child_batch
from django_redislock.queue.pool_child import run_child
from django_redislock.queue.supervisor import Supervisor
from django_redislock.queue.worker import Worker

CONCURRENCY = 2
ROUNDS = 5
#: Tasks per pass. At 20,000 a pass of the pool lasted about a quarter of a second, so its
#: fixed costs (two forks, the children's first connections and claims, about 25 ms) were a
#: tenth of it and most of the spread between passes; 60,000 measure the drain itself.
TASKS = 60_000
#: Seconds between two looks at the queue while a drain runs (both libraries).
POLL = 0.005


@dataclass
class Drain:
    """One timed drain: when it began (``perf_counter``, system-wide), and what it did."""

    started: float
    processed: int
    #: seconds until the run itself returned (our pool: its last child exited)
    returned: float


def watched(run: Callable[[], Drain], drained: Callable[[], bool]) -> tuple[float, Drain]:
    """Run ``run`` in a forked child and time it until ``drained()`` is true.

    ``drained`` is polled here, in the benchmark process, every :data:`POLL` s: the
    same clock and the same polling for both libraries, and no thread in the process
    that forks the pool.
    """
    ctx = multiprocessing.get_context("fork")
    parent, child = ctx.Pipe()
    process = ctx.Process(target=lambda: child.send(run()))
    process.start()
    while not drained():
        time.sleep(POLL)
    seen = time.perf_counter()
    drain: Drain = parent.recv()
    process.join(60)
    return seen - drain.started, drain


def fill_redislock(n: int) -> None:
    redislock_noop.enqueue_many((((i,), {}) for i in range(n)), batch_size=1000)


def drain_redislock() -> Drain:
    """Run the pool until its last child exited."""

    def make_worker(progress: Any) -> Worker:
        return Worker(
            [queues["bench"].queue("bench")],
            batch=child_batch(None, CONCURRENCY),  # drain_queue's own, without --batch
            burst=True,
            progress=progress,
        )

    def child_main(slot: int, pipes: tuple[int, int], close: list[int]) -> NoReturn:
        run_child(make_worker, pipes, close)

    start = time.perf_counter()
    outcome = Supervisor(child_main, {}, CONCURRENCY, burst=True).run()
    return Drain(start, outcome.summary.processed, time.perf_counter() - start)


def redislock_drained() -> bool:
    stats = queues["bench"].queue("bench").stats()
    return stats["ready"] + stats["delayed"] + stats["in_flight"] == 0


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


def drain_huey(client: redis.Redis, n: int) -> Drain:
    """Run Huey's two worker processes until its queue is empty, then stop them."""
    huey, _ = huey_of(fresh(client))
    logging.getLogger("huey").setLevel(logging.WARNING)
    consumer = huey.create_consumer(
        workers=CONCURRENCY, worker_type="process", periodic=False, check_worker_health=False
    )
    start = time.perf_counter()
    consumer.start()
    while huey.pending_count():
        time.sleep(POLL)
    consumer.stop(graceful=True)
    return Drain(start, n, time.perf_counter() - start)


def one_pass(name: str, client: redis.Redis, n: int) -> tuple[float, float]:
    """Tasks/s of one drain of ``n`` tasks by ``name``: until drained, and until it returned."""
    client.flushall()
    if name == "django-redislock":
        fill_redislock(n)
        seconds, drain = watched(drain_redislock, redislock_drained)
        assert drain.processed == n, f"the pool reported {drain.processed} tasks of {n}"
    else:
        fill_huey(client, n)
        huey, _ = huey_of(client)
        seconds, drain = watched(lambda: drain_huey(client, n), lambda: not huey.pending_count())
    return n / seconds, n / drain.returned


def parser() -> str:
    """Which reply parser redis-py uses here (the pool's children and Huey's inherit it)."""
    from redis.utils import HIREDIS_AVAILABLE

    if HIREDIS_AVAILABLE:
        from importlib.metadata import version

        return f"hiredis {version('hiredis')}"
    return "redis-py's own Python parser (hiredis is not installed)"


def spread(values: list[float]) -> str:
    """``min-max`` of ``values`` as whole numbers with thousands separators."""
    return f"{min(values):,.0f}-{max(values):,.0f}"


def run(server: Any, quick: bool) -> dict[str, Any]:
    n = 2000 if quick else TASKS
    rounds = 1 if quick else ROUNDS
    client = server.client()
    alias = {"bench": {"LOCATION": server.url, "KEY_PREFIX": "bench"}}
    passes: dict[str, list[float]] = {"django-redislock": [], "Huey": []}
    returned: list[float] = []  # our pool: tasks/s until its last child exited
    loads: list[float] = []
    names = list(passes)
    with override_settings(REDISLOCK_QUEUES=alias):
        for turn in range(rounds):
            for name in names[turn % 2 :] + names[: turn % 2]:
                drained, until_return = one_pass(name, client, n)
                passes[name].append(drained)
                loads.append(os.getloadavg()[0])
                if name == "django-redislock":
                    returned.append(until_return)
    ours, huey = passes["django-redislock"], passes["Huey"]
    ratios = [ours[i] / huey[i] for i in range(rounds)]
    rows = [
        {
            "library": name,
            "pool": f"{CONCURRENCY} processes",
            "drain/s": statistics.median(rates),
            "range": spread(rates),
            "best pass": max(rates),
        }
        for name, rates in passes.items()
    ]
    return {
        "name": "pool",
        "columns": ["library", "pool", "drain/s", "range", "best pass"],
        "rows": rows,
        "notes": [
            f"{n} no-op tasks drained by {CONCURRENCY} worker processes. Median of {rounds} "
            "interleaved rounds (the order rotates each round), range beside it. Load average "
            f"during the run: median {statistics.median(loads):.1f}, "
            f"{min(loads):.1f}-{max(loads):.1f}, on {os.cpu_count()} CPUs (a shared machine: "
            "the server shares the same CPUs).",
            "Reproduce: python3 dev.py bench pool. django-redislock: drain_queue --pool process "
            f"--concurrency {CONCURRENCY} --burst (its supervisor and children, each claiming "
            f"{child_batch(None, CONCURRENCY)} tasks per round trip); Huey: workers=2, "
            "worker_type='process'. Both timed from their start (forks included) until the "
            f"benchmark, polling every {POLL * 1000:g} ms, saw the queue drained; neither one's "
            "shutdown is timed.",
            "every pass (tasks/s): "
            + "; ".join(
                f"{name}: {', '.join(f'{r:,.0f}' for r in rates)}" for name, rates in passes.items()
            ),
            "django-redislock until its last child exited (tasks/s): "
            + ", ".join(f"{r:,.0f}" for r in returned),
            f"reply parser (both libraries use redis-py {redis.__version__}): {parser()}",
            "process-pool drain vs Huey (median of per-round ratios): "
            f"{statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f}); "
            f"best pass vs best pass {max(ours) / max(huey):.2f}x (target >= 8x)",
        ],
    }
