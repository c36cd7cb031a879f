"""Server capacity of the take across masters: ``redis-benchmark`` against 1, 2, 3 and 6 masters.

``bench shards`` drives a sharded stock through Python clients and is limited by them.
This suite measures at the servers instead: ``M`` masters each hold one bucket of an item
(``N`` buckets = ``M`` masters), and one ``redis-benchmark`` process per master sends the
take script (``EVALSHA`` of ``stock_take.lua``, loaded on every master, with the order
task queued in the same script) from ``CLIENTS`` connections, a distinct buyer, request id
and reservation id per call (``__rand_int__``). All the ``redis-benchmark`` processes run
at once; takes/s is counted by the servers (``INFO commandstats``: EVALSHA calls over a
measured window after a warm-up), and the server's µs per call gives each master's
capacity, ``1e6 / usec_per_call`` takes/s per core.

Each master is a standalone ``redis-server`` of its own (the take is one script in one
slot: on a cluster master it runs the same commands; a standalone server keeps the
bucket-to-master mapping exact, which a cluster's CRC16 slots do not: see the notes).

Reproduce: ``python3 dev.py bench shards_server`` (``--quick`` for a smoke run). Needs
``redis-benchmark`` on ``PATH`` (it ships with ``redis-server``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import median
from django_redislock.queue.registry import task

#: The master counts measured (N buckets = masters).
MASTERS = (1, 2, 3, 6)
#: Connections per redis-benchmark process (one process per master).
CLIENTS = 50
#: Requests each connection keeps in flight (redis-benchmark's ``-P``).
PIPELINE = 1
#: ``__rand_int__``'s range: distinct buyers (a repeat is an already-bought refusal, rare).
KEYSPACE = 2_000_000_000


@task(queue="bench-server-orders", name="bench.shards_server.create_order")
def create_order(reservation: dict[str, Any]) -> None:
    """Never runs here: the bench measures the take and its enqueue."""


def take_command(url: str) -> list[str]:
    """The take of a new buyer as the app packs it, with ``__rand_int__`` where it differs.

    Built through ``Stock``'s own call (its keys, the order task's payload), then the
    request key, the buyer and the reservation id get ``__rand_int__``.
    """
    from django_redislock.backends.redis import RedisQueueBackend
    from django_redislock.calls.script import script, sha_of
    from django_redislock.inventory import Stock

    backend = RedisQueueBackend("bench", {"LOCATION": url, "KEY_PREFIX": "bench"})
    stock = Stock("server-capacity", order_task=create_order, using=backend)
    backend.client.flushall()
    stock.set(10**9)
    script("stock_take").load(backend.client)
    call = stock._take_call(1, "buyer", None)
    keys = stock._script_keys(call)
    request = keys[4]
    keys[4] = request[: request.rindex(":") + 1] + "__rand_int__"
    args = [arg.decode() if isinstance(arg, bytes) else str(arg) for arg in call.args]
    args[1], args[2] = "b__rand_int__", "__rand_int__"
    return ["EVALSHA", sha_of("stock_take"), str(len(keys)), *keys, *args]


def start_load(port: int, command: list[str]) -> subprocess.Popen[bytes]:
    """One redis-benchmark sending ``command`` until stopped (a bound: 10^9 requests)."""
    return subprocess.Popen(
        [
            "redis-benchmark",
            *("-h", "127.0.0.1", "-p", str(port), "-c", str(CLIENTS), "-P", str(PIPELINE)),
            *("-n", str(10**9), "-r", str(KEYSPACE), "-q"),
            *command,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def evalsha(node: Any) -> tuple[int, int]:
    """The EVALSHA calls a master ran and their server µs, so far."""
    stats = node.client().info("commandstats").get("cmdstat_evalsha", {})
    return int(stats.get("calls", 0)), int(stats.get("usec", 0))


def one_pass(nodes: list[Any], masters: int, seconds: float) -> tuple[float, float]:
    """Takes/s over ``masters`` masters (each its own load) and the server µs per take."""
    used = nodes[:masters]
    commands = [take_command(node.url) for node in used]
    loads = [start_load(node.port, command) for node, command in zip(used, commands, strict=True)]
    try:
        time.sleep(0.5)  # connections open, scripts warm
        before = [evalsha(node) for node in used]
        start = time.perf_counter()
        time.sleep(seconds)
        after = [evalsha(node) for node in used]
        spent = time.perf_counter() - start
    finally:
        for load in loads:
            load.terminate()
        for load in loads:
            load.wait(30)
    calls = sum(a[0] - b[0] for a, b in zip(after, before, strict=True))
    usec = sum(a[1] - b[1] for a, b in zip(after, before, strict=True))
    if calls == 0:
        raise RuntimeError(f"no take ran on {masters} master(s): is redis-benchmark working?")
    for node in used:
        node.client().flushall()  # every take grows the order queue: start each pass empty
    return calls / spent, usec / calls


def run(server: Any, quick: bool) -> dict[str, Any]:
    from tests.servers import RedisProcess

    if shutil.which("redis-benchmark") is None:
        raise RuntimeError("redis-benchmark is not on PATH (it ships with redis-server)")
    rounds, seconds = (3, 1.0) if quick else (5, 3.0)
    rates: dict[int, list[float]] = {m: [] for m in MASTERS}
    usecs: dict[int, list[float]] = {m: [] for m in MASTERS}
    ratios: dict[int, list[float]] = {m: [] for m in MASTERS}
    loads = [os.getloadavg()[0]]
    with tempfile.TemporaryDirectory() as tmp:
        nodes = [RedisProcess(Path(tmp) / f"m{i}").start() for i in range(max(MASTERS))]
        try:
            for n in range(rounds):
                order = MASTERS[n % len(MASTERS) :] + MASTERS[: n % len(MASTERS)]
                found = {}
                for masters in order:
                    found[masters], usec = one_pass(nodes, masters, seconds)
                    rates[masters].append(found[masters])
                    usecs[masters].append(usec)
                for masters in MASTERS:
                    ratios[masters].append(found[masters] / found[1])
                loads.append(os.getloadavg()[0])
        finally:
            for node in nodes:
                node.stop()
    per_master = 1e6 / median(usecs[1])
    rows = []
    for masters in MASTERS:
        linear = median(ratios[masters]) / masters
        rows.append(
            {
                "masters (= buckets)": masters,
                "takes/s (median)": median(rates[masters]),
                "range": f"{min(rates[masters]):,.0f}-{max(rates[masters]):,.0f}",
                "x 1 master (median)": median(ratios[masters]),
                "x 1 master (range)": f"{min(ratios[masters]):.2f}-{max(ratios[masters]):.2f}",
                "of linear": f"{linear:.2f}",
                "server µs/take (median)": median(usecs[masters]),
                "capacity if each master had a core (takes/s)": per_master * masters,
            }
        )
    cores = os.cpu_count() or 1
    return {
        "name": "shards_server",
        "columns": list(rows[0]),
        "rows": rows,
        "notes": [
            f"{rounds} interleaved rounds (master-count order rotated each round), a "
            f"{seconds:g} s window per pass counted at the servers (INFO commandstats EVALSHA, "
            f"after 0.5 s warm-up); one redis-benchmark per master, -c {CLIENTS} -P {PIPELINE}, "
            f"-r {KEYSPACE:,} (distinct buyers, request ids and reservation ids). 1-minute "
            f"load average {min(loads):.1f}-{max(loads):.1f} on {cores} CPUs: the masters "
            "and the redis-benchmark processes share them.",
            f"Per-master capacity from the server's µs per take with 1 master: "
            f"{per_master:,.0f} takes/s. A master is one core; so is each redis-benchmark "
            f"process, so this machine drives about {max(1, cores // 2)} master(s) at full "
            "speed: beyond that the ratio measures the cores, not the sale. The last column "
            "projects M masters on M free cores from the per-master capacity.",
            "Reproduce: python3 dev.py bench shards_server (needs redis-benchmark on PATH).",
        ],
    }
