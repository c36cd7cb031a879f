"""``python -m bench.admin_walk_seed OUT.json``: fill the admin walk's server (a sale at scale).

Run by bench/admin_walk.py with ``DJANGO_SETTINGS_MODULE=bench.admin_walk_settings``: migrates
the walk's SQLite file, creates the superuser, then writes through the real APIs what an
operator sees during a big flash sale: finished runs of every outcome (a worker drains them,
so the run log, the task history and the function table are real), two workflows, ~155,000
queued tasks over four queues, tasks in flight, delayed and dead, 200 live workers, ~300 held
locks, semaphores, fair locks and a latch, and two sales of the example shop. Writes the ids
the walk needs (a task, a worker, a workflow, a permit) to ``OUT.json``.
"""

from __future__ import annotations

import json
import os
import sys
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.admin_walk_settings")
django.setup()

from django_redislock import chain, group, task  # noqa: E402
from django_redislock.exceptions import Retry  # noqa: E402
from django_redislock.handlers import locks, queues  # noqa: E402
from django_redislock.queue.worker import Worker  # noqa: E402
from django_redislock.queue.workers import beat  # noqa: E402

USER, PASSWORD = "walker", "walk-pass"
#: Queued tasks per queue (155,000 in all; ``ADMIN_WALK_SCALE`` scales them, for a smoke run).
SCALE = float(os.environ.get("ADMIN_WALK_SCALE", "1"))
QUEUED = {
    name: int(count * SCALE)
    for name, count in {
        "orders": 80_000,
        "emails": 40_000,
        "exports": 25_000,
        "reports": 10_000,
    }.items()
}
WORKERS = 200
LOCKS = 300
SEEN: set[int] = set()


@task(queue="orders", name="shop.tasks.create_order")
def create_order(n: int) -> int:
    return n


@task(queue="orders", name="shop.tasks.charge_card", max_attempts=1)
def charge_card(n: int) -> None:
    raise LookupError(f"card {n} declined")


@task(queue="orders", name="shop.tasks.reserve_stock", max_attempts=3)
def reserve_stock(n: int) -> int:
    if n not in SEEN:
        SEEN.add(n)
        raise Retry("stock busy", countdown=0)
    return n


def finished_runs() -> dict[str, str]:
    """Runs of every outcome on ``orders``, and a chain and a group, drained by a real worker."""
    q = queues["default"].queue("orders")
    create_order.enqueue_many([((i,), {}) for i in range(400)])
    charge_card.enqueue_many([((i,), {}) for i in range(40)])
    reserve_stock.enqueue_many([((i,), {}) for i in range(60)])
    flows = {
        "chain": str(chain(create_order.s(1), create_order.s(), charge_card.s()).delay()),
        "group": str(group(create_order.s(3), charge_card.s(4)).delay()),
    }
    for _ in range(50):  # bounded: a few burst rounds drain the retries too
        Worker([q], batch=50, burst=True).run()
        stats = q.stats()
        if not stats["ready"] + stats["in_flight"]:
            break
    return flows


def queued() -> dict[str, str]:
    """155,000 ready tasks through the real enqueue, delayed, in-flight and dead ones."""
    found = {}
    for name, count in QUEUED.items():
        q = queues["default"].queue(name)
        started = time.monotonic()
        q.enqueue_many(
            ((f"{name}-{i:06d}", create_order.payload([i], None)) for i in range(count)),
            batch_size=1000,
        )
        q.enqueue_many(
            ((f"{name}-later-{i}", create_order.payload([i], None)) for i in range(100)),
            delay=3600,
        )
        q.pop(25)  # in flight (their leases expire during the walk: "expired" to return)
        print(f"{name}: {count} queued in {time.monotonic() - started:.1f} s", flush=True)
        found[name] = f"{name}-{count // 2:06d}"
    return found


def workers() -> str:
    """200 workers in the registry: busy, idle and a few wedged, on 20 hosts."""
    backend: Any = queues["default"]
    for i in range(WORKERS):
        record: dict[str, Any] = {
            "alias": "default",
            "host": f"web-{i % 20 + 1}",
            "pid": 1000 + i,
            "queues": list(QUEUED)[: 1 + i % 4],
            "pool": "thread",
            "concurrency": 8,
            "up": 3600.0 + i,
            "processed": 1000 * i,
            "failed": i % 7,
            "tasks": [
                {"id": f"orders-{i * 8 + j:06d}", "queue": "orders", "age": 1.5 * j}
                for j in range(i % 5)
            ],
        }
        if i % 50 == 7:
            record.update(health="wedged", wedged="2 of 8 pool threads dead")
        beat(backend, f"walk-worker-{i:03d}", 3600, record)
    return "walk-worker-001"


def held_locks() -> dict[str, str]:
    """~300 held locks of every kind, semaphores, fair locks and a latch."""
    backend = locks["default"]
    for i in range(LOCKS - 10):
        assert backend.lock(f"order:{10000 + i}", ttl=3600, watchdog=False).acquire(blocking=False)
    for i in range(5):
        lock = backend.lock(f"stock:sku-{i}", ttl=3600, reentrant=True, watchdog=False)
        assert lock.acquire(blocking=False) and lock.acquire(blocking=False)
    catalog = backend.read_write_lock("catalog", ttl=3600, watchdog=False)
    for _ in range(3):
        assert catalog.read().acquire(blocking=False)
    permits = []
    for n, name in enumerate(("exports:tenant-7", "reports:nightly", "payments:psp")):
        sem = backend.semaphore(name, permits=5, ttl=3600, watchdog=False)
        permits += [sem.acquire(blocking=False) for _ in range(2 + n)]
    for name in ("ledger:eu", "ledger:us"):
        assert backend.fair_lock(name, ttl=3600, watchdog=False).acquire(blocking=False)
    assert all(permits)
    return {"permit": permits[0].id, "semaphore": "exports:tenant-7"}  # type: ignore[union-attr]


def sales() -> None:
    """Two sales of the example shop: one selling now, one ended with nothing sold."""
    from datetime import timedelta

    from django.utils import timezone
    from shop.models import Product
    from shop.services import open_sale

    now = timezone.now()
    lamp = Product.objects.create(name="Desk lamp", price=Decimal("19.00"))
    sale = open_sale(lamp, 3000, opens=now - timedelta(minutes=5), closes=now + timedelta(hours=1))
    for i in range(1200):
        assert sale.stock.take(buyer=f"buyer-{i}", data={"sale": sale.pk}).ok
    old = Product.objects.create(name="Old kettle", price=Decimal("9.00"))
    open_sale(old, 50, opens=now - timedelta(minutes=40), closes=now - timedelta(minutes=10))


def main() -> int:
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    get_user_model().objects.create_superuser(USER, "walker@example.com", PASSWORD)
    started = time.monotonic()
    ids: dict[str, Any] = {"workflows": finished_runs()}
    ids["tasks"] = queued()
    ids["worker"] = workers()
    ids.update(held_locks())
    ids["queued"] = {name: queues["default"].queue(name).stats()["ready"] for name in QUEUED}
    ids["workers"] = WORKERS
    ids["locks"] = locks["default"].held_lock_count()
    sales()
    ids["seconds"] = round(time.monotonic() - started, 1)
    Path(sys.argv[1]).write_text(json.dumps(ids))
    print(f"seeded in {ids['seconds']} s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
