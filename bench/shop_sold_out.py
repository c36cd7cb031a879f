"""The example shop over HTTP after its sale sold out: requests/s with and without the flag.

Once a sale is sold out, every further buyer is refused (HTTP 409). A gunicorn worker
that remembers the sell-out (``django_redislock.inventory.sold_out``, the local flag)
answers with 0 Redis commands; the same shop with that memory bypassed
(``bench/shop_memoryless_settings.py``: nothing is remembered) runs the take script in
Redis for every buyer, as the shop did before the flag. Both shops run at once under
gunicorn (``WORKERS`` sync workers each) on the suite's server, on the same sold-out sale;
each pass posts ``requests`` buy requests of new buyers from ``THREADS`` client threads
(``shop.swarm.Swarm``), in 3+ interleaved rounds (order alternated). Redis commands per
request are counted by ``INFO commandstats`` around each pass (INFO's own excluded).

Reproduce: ``python3 dev.py bench shop_sold_out`` (``--quick`` for a smoke run).
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import median
from bench.seckill import open_shop_sale

ROOT = Path(__file__).resolve().parent.parent
CASES = {
    "local sold-out flag (the shop as shipped)": "shopsite.settings",
    "flag bypassed (every buyer asks Redis)": "bench.shop_memoryless_settings",
}
WORKERS = 2
THREADS = 8


def commands(client: Any) -> int:
    """Commands the server ran so far, INFO's own excluded."""
    stats = client.info("commandstats")
    return sum(int(v["calls"]) for name, v in stats.items() if name != "cmdstat_info")


def one_pass(swarm: Any, client: Any, requests: int, tag: str) -> tuple[float, float]:
    """Refused buyers per second over HTTP, and Redis commands per request."""
    before = commands(client)
    start = time.perf_counter()
    answers = swarm.run([f"{tag}-{i}" for i in range(requests)])
    elapsed = time.perf_counter() - start
    sent = commands(client) - before
    wrong = [answer for answer in answers if answer.status != 409 or answer.result != "sold_out"]
    if wrong:
        raise RuntimeError(f"a sold-out sale answered {wrong[0]}")
    return requests / elapsed, sent / requests


def run(server: Any, quick: bool) -> dict[str, Any]:
    sys.path.insert(0, str(ROOT / "example_project"))
    from shop.server import running
    from shop.swarm import Swarm

    rounds, requests = (3, 300) if quick else (5, 2000)
    client = server.client()
    rates: dict[str, list[float]] = {case: [] for case in CASES}
    per_request: dict[str, list[float]] = {case: [] for case in CASES}
    ratios: list[float] = []
    loads = [os.getloadavg()[0]]
    with tempfile.TemporaryDirectory() as name, contextlib.ExitStack() as stack:
        (Path(name) / "shop").mkdir()
        env = {
            "SHOP_DATA_DIR": str(Path(name) / "shop"),
            "SHOP_REDIS_URL": server.url,
            "SHOP_DEBUG": "0",
            "DJANGO_SETTINGS_MODULE": "shopsite.settings",
            "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "example_project")]),
        }
        sale_id = open_shop_sale(env, units=1)
        swarms = {}
        for case, settings in CASES.items():
            port = stack.enter_context(
                running(WORKERS, {**env, "DJANGO_SETTINGS_MODULE": settings})
            )
            swarm = Swarm(port, sale_id, concurrency=THREADS)
            swarm.fetch_csrf()
            swarm.warm_up(WORKERS * 8)
            swarm.run([f"warm-{port}-{i}" for i in range(WORKERS * 50)])  # sells the unit
            swarms[case] = swarm
        for n in range(rounds):
            found = {}
            for case in list(CASES)[:: 1 if n % 2 == 0 else -1]:
                found[case], sent = one_pass(swarms[case], client, requests, f"r{n}-{case[:4]}")
                rates[case].append(found[case])
                per_request[case].append(sent)
            flag, bypassed = CASES
            ratios.append(found[flag] / found[bypassed])
            loads.append(os.getloadavg()[0])
    rows = [
        {
            "shop after sell-out (HTTP, gunicorn)": case,
            "requests/s (median)": median(rates[case]),
            "range": f"{min(rates[case]):,.0f}-{max(rates[case]):,.0f}",
            "Redis commands per request (median)": median(per_request[case]),
        }
        for case in CASES
    ]
    return {
        "name": "shop_sold_out",
        "columns": list(rows[0]),
        "rows": rows,
        "notes": [
            f"Flag on vs bypassed: {median(ratios):.2f}x the requests/s "
            f"({min(ratios):.2f}-{max(ratios):.2f}), ratios within a round.",
            f"{rounds} interleaved rounds of {requests} buy requests (new buyers) per shop, "
            f"{THREADS} client threads with keep-alive connections, gunicorn with {WORKERS} sync "
            f"workers per shop, DEBUG off, SQLite; every answer checked to be 409 sold_out. "
            f"1-minute load average {min(loads):.1f}-{max(loads):.1f} on {os.cpu_count()} CPUs "
            "(both shops, the client threads and Redis share them).",
            "Reproduce: python3 dev.py bench shop_sold_out.",
        ],
    }
