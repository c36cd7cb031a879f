"""A shop process for the seckill tests: ``python -m tests.seckill_proc setup|buy|report``.

``setup``   migrate the SQLite file in ``SHOP_TEST_DB`` and open a sale (``--shards N``:
            over N buckets); prints its id
``buy``     take units for a range of buyers from several threads; prints one JSON line
            per answer (``--pause`` slows each thread down so a kill lands mid-flow;
            ``--retries N``: a take that fails with ``ConnectionFailed`` prints an
            ``error`` line and is tried again, up to N times, 0.1 s apart)
``report``  print the orders in the database, the stock's reservations, its buckets
            (units key, units left) and whether ``reconcile()`` finds it clean, as JSON
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from typing import Any

import django


def setup(units: int, shards: int) -> None:
    from decimal import Decimal

    from django.core.management import call_command
    from shop.models import Product
    from shop.services import open_sale

    call_command("migrate", verbosity=0, run_syncdb=True)
    product = Product.objects.create(name="Phone X", price=Decimal(999))
    print(open_sale(product, units, shards=shards).pk, flush=True)


def buy(sale_id: int, buyers: list[str], threads: int, pause: float, retries: int = 0) -> None:
    from shop.tasks import sale_stock

    from django_redislock.exceptions import ConnectionFailed

    stock = sale_stock(sale_id)
    lock = threading.Lock()
    chunks = [buyers[i::threads] for i in range(threads)]
    print("started", flush=True)

    def work(chunk: list[str]) -> None:
        for buyer in chunk:
            for attempt in range(retries + 1):
                try:
                    take = stock.take(buyer=buyer, data={"sale": sale_id})
                    break
                except ConnectionFailed:
                    if attempt == retries:
                        raise
                    with lock:
                        print(json.dumps([buyer, "error", None]), flush=True)
                    time.sleep(0.1)
            reservation = take.reservation.id if take.reservation else None
            with lock:
                print(json.dumps([buyer, take.result.value, reservation]), flush=True)
            if pause:
                time.sleep(pause)

    workers = [threading.Thread(target=work, args=(chunk,)) for chunk in chunks]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(120)


def delayed_order_tasks(queue: Any) -> int:
    """Delayed tasks other than the pay-window expiries (15 minutes away): retries backing off."""
    from django_redislock.queue import DELAYED

    count, after = 0, None
    for _ in range(100):  # bounded: at most 50,000 delayed tasks
        page = queue.tasks(DELAYED, 500, after)
        count += sum(not task.id.startswith("expire:") for task in page)
        if len(page) < 500:
            break
        after = page[-1]
    return count


def report(sale_id: int) -> None:
    from shop.models import Order
    from shop.tasks import sale_stock

    stock = sale_stock(sale_id)
    orders = list(Order.objects.filter(sale_id=sale_id).values_list("number", "buyer", "quantity"))
    reservations = [[r.id, r.buyer, r.qty] for r in stock.reservations()]
    stats: dict[str, Any] = stock.stats().as_dict()
    from django_redislock import queues

    orders_queue = queues["default"].queue("orders")
    queue = {k: v for k, v in orders_queue.stats().items() if k != "queue"}
    queue["delayed_orders"] = delayed_order_tasks(orders_queue)
    buckets = [
        {"units_key": stock.bucket(index).keys()[0], "remaining": part.remaining}
        for index, part in enumerate(stock.bucket_stats())
    ]
    clean = stock.reconcile().clean
    print(
        json.dumps(
            {
                "orders": orders,
                "reservations": reservations,
                "stats": stats,
                "queue": queue,
                "buckets": buckets,
                "clean": clean,
            },
            default=str,
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("command", choices=["setup", "buy", "report"])
    parser.add_argument("--units", type=int, default=100)
    parser.add_argument("--shards", type=int, default=1)
    parser.add_argument("--sale", type=int, default=0)
    parser.add_argument("--buyers", default="", help="comma-separated buyer ids")
    parser.add_argument("--threads", type=int, default=5)
    parser.add_argument("--pause", type=float, default=0.0)
    parser.add_argument("--retries", type=int, default=0)
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.shop_process_settings")
    django.setup()
    if args.command == "setup":
        setup(args.units, args.shards)
    elif args.command == "buy":
        buy(args.sale, args.buyers.split(","), args.threads, args.pause, args.retries)
    else:
        report(args.sale)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
