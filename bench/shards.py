"""Sharded stock: takes/s of one item kept in one bucket against split over 3, on 3 masters.

The suite starts its own 3-master Redis Cluster (``tests.servers.start_cluster``, the
test fixture's layout; the shared single server is not used). One item never sells out
(10^9 units); every call is ``Stock.take`` for a new buyer with the order task queued
in the same script (what the shop does). Load: ``PROCESSES`` client processes of
``THREADS`` threads each, started together; each pass runs both cases for the same
time, in alternated order, and a round's takes/s is the sum over the processes. The
number of takes each master ran (``INFO commandstats``, EVALSHA calls) shows where the
load went: with one bucket every take is on the master of the item's slot.
"""

from __future__ import annotations

import multiprocessing
import os
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench.common import median
from django_redislock.queue.registry import task

CASES = (1, 3, 6)
PROCESSES = 4
THREADS = 4


@task(queue="bench-shard-orders", name="bench.shards.create_order")
def create_order(reservation: dict[str, Any]) -> None:
    """Never runs here: the bench measures the take and its enqueue."""


def client(url: str, shards: int, seconds: float, start_at: float, tag: str) -> int:
    """One client process: takes of new buyers from ``THREADS`` threads; how many ran."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
    import django

    django.setup()
    from django_redislock.backends.redis import RedisQueueBackend
    from django_redislock.inventory import Stock

    params = {"LOCATION": url, "KEY_PREFIX": "bench", "OPTIONS": {"CLUSTER": True}}
    backend = RedisQueueBackend("bench", params)
    stock = Stock(f"shards-{shards}", order_task=create_order, using=backend)
    if stock.shards() != shards:
        raise RuntimeError(f"stock split over {stock.shards()} buckets, not {shards}")
    counts = [0] * THREADS

    def loop(i: int) -> None:
        time.sleep(max(0.0, start_at - time.time()))
        deadline = time.perf_counter() + seconds
        while time.perf_counter() < deadline and counts[i] < 10_000_000:
            if not stock.take(buyer=f"{tag}-{i}-{counts[i]}").ok:
                raise RuntimeError("a take of a stock that cannot sell out was refused")
            counts[i] += 1

    workers = [threading.Thread(target=loop, args=(i,)) for i in range(THREADS)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(seconds + 120)
    return sum(counts)


def one_pass(
    pool: Any, nodes: list[Any], shards: int, seconds: float, tag: str
) -> tuple[float, list[int], float]:
    """Takes/s of all client processes, each master's EVALSHA calls, server µs per call."""
    for node in nodes:
        node.client().config_resetstat()
    start_at = time.time() + 1.0  # every process is connected and waiting by then
    jobs = [
        pool.apply_async(client, (nodes[0].url, shards, seconds, start_at, f"{tag}-{p}"))
        for p in range(PROCESSES)
    ]
    total = sum(job.get(timeout=seconds + 300) for job in jobs)
    calls, usec = [], []
    for node in nodes:
        stats = node.client().info("commandstats").get("cmdstat_evalsha", {})
        calls.append(int(stats.get("calls", 0)))
        usec.append(int(stats.get("usec", 0)))
    return total / seconds, calls, sum(usec) / max(1, sum(calls))


def prepare(nodes: list[Any]) -> None:
    """Empty the masters and put both items on sale (in the parent process)."""
    from django_redislock.backends.redis import RedisQueueBackend
    from django_redislock.inventory import Stock

    for node in nodes:
        node.client().flushall()
    params = {"LOCATION": nodes[0].url, "KEY_PREFIX": "bench", "OPTIONS": {"CLUSTER": True}}
    backend = RedisQueueBackend("bench", params)
    for shards in CASES:
        Stock(f"shards-{shards}", order_task=create_order, using=backend).set(10**9, shards=shards)


def run(server: Any, quick: bool) -> dict[str, Any]:
    from tests.servers import start_cluster

    rounds, seconds = (3, 1.0) if quick else (5, 3.0)
    rates: dict[int, list[float]] = {shards: [] for shards in CASES}
    spread: dict[int, list[list[int]]] = {shards: [] for shards in CASES}
    usecs: dict[int, list[float]] = {shards: [] for shards in CASES}
    ratios: dict[int, list[float]] = {shards: [] for shards in CASES[1:]}
    loads = [os.getloadavg()[0]]
    context = multiprocessing.get_context("spawn")
    with tempfile.TemporaryDirectory() as tmp:
        nodes = start_cluster(Path(tmp), masters=3)
        try:
            with context.Pool(PROCESSES) as pool:
                for n in range(rounds):
                    prepare(nodes)  # the order queues grow by every take: start each round empty
                    found: dict[int, float] = {}
                    for shards in CASES if n % 2 == 0 else CASES[::-1]:
                        found[shards], calls, usec = one_pass(pool, nodes, shards, seconds, f"r{n}")
                        rates[shards].append(found[shards])
                        spread[shards].append(calls)
                        usecs[shards].append(usec)
                    for shards in CASES[1:]:
                        ratios[shards].append(found[shards] / found[1])
                    loads.append(os.getloadavg()[0])
        finally:
            for node in nodes:
                node.stop()
    rows = []
    for shards in CASES:
        last = spread[shards][-1]
        rows.append(
            {
                "stock (one item, order task queued)": f"shards={shards}",
                "takes/s (median)": median(rates[shards]),
                "range": f"{min(rates[shards]):,.0f}-{max(rates[shards]):,.0f}",
                "takes per master, last round (%)": " / ".join(
                    f"{100 * c / max(1, sum(last)):.0f}" for c in last
                ),
                "server µs per script call (median)": median(usecs[shards]),
            }
        )
    versus = "; ".join(
        f"shards={shards} vs shards=1: {median(found):.2f}x ({min(found):.2f}-{max(found):.2f})"
        for shards, found in ratios.items()
    )
    return {
        "name": "shards",
        "columns": list(rows[0]),
        "rows": rows,
        "notes": [
            f"{rounds} rounds of {seconds:g} s per case (order alternated), {PROCESSES} client "
            f"processes x {THREADS} threads, a new buyer per take, on a 3-master cluster "
            f"started by the suite. 1-minute load average {min(loads):.1f}-{max(loads):.1f} "
            f"on {os.cpu_count()} CPUs (the 3 masters and the clients share them).",
            f"{versus}. Script calls include the claim and the sweep's extra takes (none here:"
            " the item never sells out, so every take is one script on the buyer's home bucket).",
            "Which master a bucket lands on is its slot's (CRC16 of the queue's tag): with 3"
            " buckets on 3 masters two buckets may share one, as the per-master split shows.",
            "Reproduce: python3 dev.py bench shards.",
        ],
    }
