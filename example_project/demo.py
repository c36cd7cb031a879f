#!/usr/bin/env python3
"""The flash-sale demo behind ``python3 dev.py demo``.

It migrates the shop's database, creates an admin user, opens a sale, starts the
shop under gunicorn on 127.0.0.1, fires hundreds of concurrent buyers at it over
HTTP (some of them twice), drains the order queue with ``drain_queue --burst``
and prints what happened. It exits 1 when an invariant fails: units oversold,
a buyer with two orders, a sold unit without its order, or a unit left unsold
after a buyer was told "sold out".

``--shards N`` opens the sale over N buckets (``Stock.set(units, shards=N)``):
the buyers are spread over the buckets, the demo drains every bucket's order
queue and prints a table of the buckets under the report.

Everything lives under ``--data-dir`` (default ``example_project/var``): the
SQLite database and the embedded Redis, so the shop started afterwards with
``manage.py runserver`` shows the same sale in its admin.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

PROJECT_DIR = Path(__file__).resolve().parent
ADMIN = ("admin", "admin")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--units", type=int, default=100, help="units on sale (100)")
    parser.add_argument("--buyers", type=int, default=400, help="distinct buyers (400)")
    parser.add_argument("--twice", type=float, default=0.1, help="share who buy twice (0.1)")
    parser.add_argument("--concurrency", type=int, default=32, help="requests in flight (32)")
    parser.add_argument("--workers", type=int, default=4, help="gunicorn workers (4)")
    parser.add_argument("--data-dir", type=Path, default=PROJECT_DIR / "var")
    parser.add_argument("--seed", type=int, default=None, help="random seed for the buyer order")
    parser.add_argument(
        "--shards",
        type=int,
        default=None,
        help="buckets the stock is split over (1: one key; 3 with --cluster)",
    )
    parser.add_argument(
        "--cluster",
        action="store_true",
        help="run the sale on a 3-master Redis Cluster started for the demo (needs the repo's "
        "tests/servers.py; stopped at the end)",
    )
    args = parser.parse_args(argv)
    if args.units < 1 or args.buyers < 1 or not 0 <= args.twice <= 1:
        parser.error("--units and --buyers must be >= 1 and --twice in [0, 1]")
    if args.shards is None:
        args.shards = 3 if args.cluster else 1
    if not 1 <= args.shards <= args.units:
        parser.error("--shards must be between 1 and --units")
    return args


def setup_django(data_dir: Path) -> None:
    """Configure this process (and, through the environment, its children) for the shop."""
    data_dir.mkdir(parents=True, exist_ok=True)
    os.environ["SHOP_DATA_DIR"] = str(data_dir.resolve())
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "shopsite.settings")
    sys.path.insert(0, str(PROJECT_DIR))
    import django

    django.setup()


def step(text: str) -> None:
    print(f"==> {text}", flush=True)


def prepare(units: int, shards: int = 1) -> Any:
    """Migrate, make sure the admin user exists, open a sale of ``units`` (``shards`` buckets)."""
    from decimal import Decimal

    from django.contrib.auth.models import User
    from django.core.management import call_command
    from shop.models import Product
    from shop.services import open_sale

    step("migrating the database")
    call_command("migrate", verbosity=0)
    if not User.objects.filter(username=ADMIN[0]).exists():
        User.objects.create_superuser(ADMIN[0], "admin@example.com", ADMIN[1])
    product, _ = Product.objects.get_or_create(name="Phone X", defaults={"price": Decimal(999)})
    sale = open_sale(product, units, shards=shards if shards > 1 else None)
    where = f"stock in Redis: {sale.item}"
    if shards > 1:
        where += f", {shards} buckets, order queues {', '.join(sale.stock.order_queues())}"
    step(f"opened sale {sale.pk}: {units} x {product.name} ({where})")
    return sale


def buyer_list(count: int, twice: float, seed: int | None) -> list[str]:
    """``count`` buyers, a ``twice`` share of them twice, shuffled (repeats may overlap)."""
    rng = random.Random(seed)
    buyers = [f"buyer-{i:05d}" for i in range(count)]
    buyers += rng.sample(buyers, round(count * twice))
    rng.shuffle(buyers)
    return buyers


def fire(sale_id: int, buyers: list[str], concurrency: int, workers: int) -> tuple[Any, float]:
    """Run gunicorn and the buyers; returns the answers and the seconds they took."""
    from shop.server import running
    from shop.swarm import Swarm

    step(f"starting gunicorn with {workers} workers on 127.0.0.1")
    with running(workers, {"SHOP_DATA_DIR": os.environ["SHOP_DATA_DIR"]}) as port:
        swarm = Swarm(port, sale_id, concurrency)
        swarm.fetch_csrf()
        swarm.warm_up(workers * 8)
        step(f"{len(buyers)} buy requests from {len(set(buyers))} buyers, {concurrency} at a time")
        start = time.perf_counter()
        answers = swarm.run(buyers)
        return answers, time.perf_counter() - start


def drain(queues: list[str]) -> int:
    """``manage.py drain_queue <queues> --burst`` (its progress bar shows on a terminal).

    ``queues``: the sale's order queues, one per bucket of its stock (``orders`` for one).
    """
    step(f"draining the order queue{'s' if len(queues) > 1 else ''} {', '.join(queues)}")
    command = [sys.executable, str(PROJECT_DIR / "manage.py"), "drain_queue", *queues, "--burst"]
    return subprocess.run(command, check=False, timeout=300).returncode


def failed_order_runs() -> int:
    """Runs of the orders queue that failed so far (the workers' ``failed`` counter)."""
    from shop import tasks

    from django_redislock.queue.stats import counters_key

    queue = tasks.create_order.queue
    return int(queue.backend.client.hget(counters_key(queue), "failed") or 0)


def report(
    sale: Any, answers: list[Any], seconds: float, drained: int, failed_runs: int = 0
) -> list[str]:
    """Print the report; returns the failed invariants."""
    from django.db.models import Count, Sum
    from shop.models import Order
    from shop.swarm import percentile

    results = Counter(answer.result for answer in answers)
    accepted = {answer.order for answer in answers if answer.status == 202}
    orders = Order.objects.filter(sale=sale)
    numbers = set(orders.values_list("number", flat=True))
    ordered_units = orders.aggregate(total=Sum("quantity"))["total"] or 0
    duplicates = orders.values("buyer").annotate(n=Count("pk")).filter(n__gt=1).count()
    parts = sale.stock.bucket_stats()
    stats = sale.stock.stats()
    latencies = [answer.seconds * 1000 for answer in answers]
    errors = sum(1 for answer in answers if answer.status not in (202, 409))
    checks = {
        "oversold units": max(0, ordered_units - sale.units, -stats.remaining),
        "duplicate orders": duplicates,
        "sold units without an order": len(accepted - numbers),
        "orders without a sale": len(numbers - accepted),
        "stock that does not add up": abs(stats.remaining + stats.sold - sale.units),
        # demand exceeded supply (someone was told "sold out"): no bucket may keep a unit
        "units unsold after a sold-out": stats.remaining if results["sold_out"] else 0,
        "failed requests (not 202/409)": errors,
        "drain_queue exit code": drained,
    }
    rows = [
        ("requests", len(answers)),
        ("sold (202)", results["ok"]),
        ("sold out (409)", results["sold_out"]),
        ("duplicates refused (409)", results["already_bought"]),
        ("orders in the database", len(numbers)),
        ("units left in Redis", stats.remaining),
        ("failed order runs (retried)", failed_runs),
        (
            "latency p50 / p99",
            f"{percentile(latencies, 50):.1f} / {percentile(latencies, 99):.1f} ms",
        ),
        ("throughput", f"{len(answers) / seconds:,.0f} requests/s over {seconds:.2f}s"),
    ]
    rows += [(name, value) for name, value in checks.items()]
    print("\nFlash sale report\n-----------------")
    for name, value in rows:
        print(f"{name:<32}{value}")
    if len(parts) > 1:
        queues = sale.stock.order_queues()
        header = f"{'bucket':<8}{'left':>6}{'taken':>7}{'restored':>10}{'buyers':>8}{'refused':>9}"
        print(f"\n{header}  order queue")
        for index, part in enumerate(parts):
            print(
                f"{index:<8}{part.remaining:>6}{part.taken:>7}{part.restored:>10}"
                f"{part.buyers:>8}{refused_by_script(part):>9}  {queues[index]}"
            )
        print(
            "refused: takes the bucket's script refused (already bought, not open, ended, not "
            "admitted); sold-out answers are counted by each process and shown in the admin"
        )
        print()
    return [f"{name} = {value}" for name, value in checks.items() if value]


def refused_by_script(part: Any) -> int:
    """The refusals one bucket's take script counted (``StockStats.refused``): all but the
    sold-out answers, which each process counts and adds every few seconds."""
    return sum(n for reason, n in part.refused.items() if not reason.startswith("sold_out"))


def farewell(data_dir: Path) -> None:
    manage = f"{Path(sys.executable)} {PROJECT_DIR / 'manage.py'}"
    if data_dir.resolve() != (PROJECT_DIR / "var").resolve():
        manage = f"SHOP_DATA_DIR={data_dir} {manage}"
    print(
        "\nTry the shop yourself (the sale above is still there):\n"
        f"  {manage} runserver\n"
        "      then open http://127.0.0.1:8000/ and press Buy now\n"
        f"  {manage} drain_queue\n"
        "      in a second terminal: the worker that turns reservations into orders\n"
        f"  Admin: http://127.0.0.1:8000/admin/  user {ADMIN[0]!r}, password {ADMIN[1]!r}\n"
        "      sales show their live Redis stock; the Redis dashboard lists locks and queues"
    )


def stop_embedded(location: str) -> None:
    """Stop the embedded server unless another process (a runserver, a worker) still uses it."""
    from django_redislock.embedded import stop_server, users

    if location.startswith("embedded://"):
        path = location.removeprefix("embedded://")
        if not [pid for pid in users(path) if pid != os.getpid()]:
            stop_server(path)


def start_cluster(data_dir: Path) -> list[Any]:
    """Start a 3-master Redis Cluster (the tests' servers) and point the shop at it."""
    sys.path.insert(0, str(PROJECT_DIR.parent))
    from tests.servers import start_cluster as start

    step("starting a 3-master Redis Cluster on 127.0.0.1")
    directory = data_dir.resolve() / f"cluster-{os.getpid()}"
    nodes = start(directory)
    os.environ["SHOP_REDIS_URL"] = nodes[0].url
    os.environ["SHOP_REDIS_CLUSTER"] = "1"
    return nodes


def bucket_masters(sale: Any) -> list[str]:
    """The master (host:port) that holds each bucket of the sale's stock, on a cluster."""
    client = sale.stock.backend.client
    found = []
    for index in range(sale.stock.shards()):
        key = sale.stock.bucket(index).keys()[0]
        node = client.get_node_from_key(key)
        found.append(f"{node.host}:{node.port}")
    return found


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    nodes = start_cluster(args.data_dir) if args.cluster else []
    setup_django(args.data_dir)
    from django.conf import settings

    try:
        sale = prepare(args.units, args.shards)
        buyers = buyer_list(args.buyers, args.twice, args.seed)
        failed_before = failed_order_runs()
        answers, seconds = fire(sale.pk, buyers, args.concurrency, args.workers)
        drained = drain(sale.stock.order_queues())
        failures = report(sale, answers, seconds, drained, failed_order_runs() - failed_before)
        if nodes:
            masters = bucket_masters(sale)
            print(f"buckets on masters: {', '.join(masters)} ({len(set(masters))} distinct)")
    finally:
        stop_embedded(settings.REDISLOCK_QUEUES["default"]["LOCATION"])
        for node in nodes:
            node.stop()
        if nodes:
            shutil.rmtree(args.data_dir.resolve() / f"cluster-{os.getpid()}", ignore_errors=True)
    if failures:
        print("\nINVARIANTS FAILED: " + "; ".join(failures))
        return 1
    print("\nAll invariants hold: nothing oversold, one order per buyer, every sale has its order.")
    if not nodes:  # the cluster is gone: nothing to try afterwards
        farewell(args.data_dir)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
