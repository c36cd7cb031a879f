"""After sell-out: buyers refused per second by one process, from memory and from Redis.

Once a stock is sold out, every further buyer is refused. A process that remembers the
sell-out (``django_redislock.inventory.sold_out``, its listener subscribed) answers with
0 Redis commands; the same process asking Redis sends one ``GET`` of the units per buyer
(what a process does when its memory is too old to trust). Both are ``Stock.take`` for a
new buyer per call, in 5 interleaved rounds of about 1 s each (order alternated), one
thread; the Redis commands are counted by ``INFO commandstats`` around each pass.
"""

from __future__ import annotations

import os
from typing import Any

from bench.common import median, rate
from django_redislock.backends.redis import RedisQueueBackend
from django_redislock.inventory import Stock, TakeResult, sold_out

CASES = ("refused from memory (listener subscribed)", "refused by asking Redis (a GET probe)")


def commands(client: Any) -> int:
    """Commands the server ran so far (since the last reset), INFO's own excluded."""
    stats = client.info("commandstats")
    return sum(int(v["calls"]) for name, v in stats.items() if name != "cmdstat_info")


def one_pass(case: str, stock: Stock, client: Any, seconds: float) -> tuple[float, float]:
    """Buyers refused per second, and Redis commands per refused buyer."""
    counter = iter(range(10**9))
    refused = 0

    def buy() -> None:
        nonlocal refused
        take = stock.take(buyer=f"late-{next(counter)}")
        if take.result is not TakeResult.SOLD_OUT:
            raise RuntimeError(f"a sold-out stock answered {take.result}")
        refused += 1

    age = sold_out.MAX_AGE
    sold_out.MAX_AGE = 3600.0 if case == CASES[0] else 0.0
    try:
        client.config_resetstat()
        per_second = rate(buy, seconds=seconds)
        sent = commands(client) - 1  # the CONFIG RESETSTAT
    finally:
        sold_out.MAX_AGE = age
    return per_second, sent / refused


def run(server: Any, quick: bool) -> dict[str, Any]:
    rounds, seconds = (3, 0.3) if quick else (5, 1.0)
    backend = RedisQueueBackend("bench", {"LOCATION": server.url, "KEY_PREFIX": "bench"})
    client = server.client()
    client.flushall()
    stock = Stock("bench-sold-out-memory", queue=None, using=backend)
    stock.set(0)
    sold_out.memory.clear()
    assert stock.take(buyer="first").result is TakeResult.SOLD_OUT  # starts the listener
    if not sold_out.memory.listeners[id(backend)].subscribed.wait(10):
        raise RuntimeError("the sold-out listener did not subscribe")
    sold_out.memory.forget(backend, stock.keys()[0])
    assert stock.take(buyer="second").result is TakeResult.SOLD_OUT  # remembered, tracked
    rates: dict[str, list[float]] = {case: [] for case in CASES}
    sent: dict[str, list[float]] = {case: [] for case in CASES}
    ratios: list[float] = []
    loads = [os.getloadavg()[0]]
    for n in range(rounds):
        found = {}
        for case in CASES if n % 2 == 0 else CASES[::-1]:
            found[case], per_buyer = one_pass(case, stock, client, seconds)
            rates[case].append(found[case])
            sent[case].append(per_buyer)
        ratios.append(found[CASES[0]] / found[CASES[1]])
        loads.append(os.getloadavg()[0])
    client.flushall()
    rows = [
        {
            "case (one process, one thread)": case,
            "buyers refused/s (median)": median(rates[case]),
            "range": f"{min(rates[case]):,.0f}-{max(rates[case]):,.0f}",
            "Redis commands per refused buyer": median(sent[case]),
        }
        for case in CASES
    ]
    ratio = median(ratios)
    return {
        "name": "sold_out",
        "columns": list(rows[0]),
        "rows": rows,
        "notes": [
            f"{rounds} interleaved rounds of {seconds:g} s per case (order alternated), one "
            "thread calling Stock.take for a new buyer each time; commands counted by INFO "
            "commandstats around each pass. 1-minute load average "
            f"{min(loads):.1f}-{max(loads):.1f} on {os.cpu_count()} CPUs.",
            f"from memory vs asking Redis: {ratio:.1f}x ({min(ratios):.1f}-{max(ratios):.1f}) "
            f"(target >= 20x); Redis commands per refused buyer from memory: "
            f"{median(sent[CASES[0]]):g} (target 0).",
            "Reproduce: python3 dev.py bench sold_out.",
        ],
    }
