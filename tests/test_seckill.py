"""The seckill guarantees with real processes: many buyers at once, and SIGKILL mid-flow.

* 500 buyers over 20 threads in 4 processes against 100 units, 10% of them trying
  twice: exactly 100 reservations, stock 0, nobody twice, 100 orders after draining.
* A buyer process and then a worker are killed with SIGKILL at random points (right
  after take scripts, during order creation): after recovery every sold unit has
  exactly one order.

Both run on the real single server and the real cluster (fakeredis cannot be shared
between processes).
"""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from django.test import override_settings
from shop import tasks
from shop.models import Order, Product
from shop.services import open_sale

from django_redislock.queue.worker import Worker

from .conftest import RedisTarget

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow


@pytest.fixture(params=["single", "cluster"])
def real(request: pytest.FixtureRequest) -> Iterator[RedisTarget]:
    target: RedisTarget = request.getfixturevalue(f"{request.param}_target")
    aliases = {"default": {**target.params(), "KEY_PREFIX": "test"}}
    with override_settings(REDISLOCK_LOCKS=aliases, REDISLOCK_QUEUES=aliases):
        yield target


def process_env(target: RedisTarget, db: Path | None = None) -> dict[str, str]:
    location = target.location if isinstance(target.location, str) else target.location[0]
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.shop_process_settings",
        "REDISLOCK_TEST_URL": location,
        "REDISLOCK_TEST_OPTIONS": json.dumps(target.options),
        "PYTHONPATH": str(ROOT),
        "PYTHONUNBUFFERED": "1",
    }
    if db is not None:
        env["SHOP_TEST_DB"] = str(db)
    return env


def spawn(env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    command = [sys.executable, "-m", "tests.seckill_proc", *args]
    return subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def finish(process: subprocess.Popen[str], timeout: float = 120) -> str:
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        out, err = process.communicate()
        raise AssertionError(f"process did not finish: {err[-2000:]}") from None
    assert process.returncode == 0, err[-3000:]
    return out


def answers(out: str) -> list[list[Any]]:
    return [json.loads(line) for line in out.splitlines() if line.startswith("[")]


@pytest.mark.django_db(transaction=True)
def test_500_buyers_in_4_processes_get_exactly_100_units(real: RedisTarget) -> None:
    product = Product.objects.create(name="Phone X", price=Decimal(999))
    sale = open_sale(product, 100)
    rng = random.Random(6)
    buyers = [f"b{i:03d}" for i in range(500)]
    groups = []
    for share in (buyers[i::4] for i in range(4)):  # 10% try twice, from the same process
        group = share + rng.sample(share, len(share) // 10)
        rng.shuffle(group)
        groups.append(group)
    env = process_env(real)
    processes = [
        spawn(env, "buy", "--sale", str(sale.pk), "--threads", "5", "--buyers", ",".join(group))
        for group in groups
    ]
    seen = [answer for process in processes for answer in answers(finish(process))]
    assert len(seen) == 500 + sum(len(g) for g in groups) - 500
    results = Counter(result for _, result, _ in seen)
    assert results["ok"] == 100
    assert results["ok"] + results["sold_out"] + results["already_bought"] == len(seen)
    winners = Counter(buyer for buyer, result, _ in seen if result == "ok")
    assert max(winners.values()) == 1
    stock = sale.stock
    stats = stock.stats()
    assert (stats.remaining, stats.sold, stats.reservations, stats.buyers) == (0, 100, 100, 100)
    summary = Worker([tasks.create_order.queue], burst=True, timeout=60).run()
    assert (summary.succeeded, summary.failed) == (100, 0)
    orders = Order.objects.filter(sale=sale)
    assert orders.count() == 100
    assert set(orders.values_list("buyer", flat=True)) == set(winners)
    reserved = {reservation for _, result, reservation in seen if result == "ok"}
    assert set(orders.values_list("number", flat=True)) == reserved


def order_count(db: Path) -> int:
    try:
        with sqlite3.connect(db, timeout=5) as conn:
            return int(conn.execute("SELECT count(*) FROM shop_order").fetchone()[0])
    except sqlite3.OperationalError:
        return 0


def kill_at_random(process: subprocess.Popen[str], rng: random.Random, most: float) -> None:
    time.sleep(rng.uniform(0, most))
    process.send_signal(signal.SIGKILL)
    process.communicate(timeout=30)


def order_queues(shards: int) -> list[str]:
    """The order queue of every bucket of a sale over ``shards`` buckets."""
    return ["orders", *(f"orders.s{i}" for i in range(1, shards))]


def drain_command(*args: str, shards: int = 1) -> list[str]:
    return [sys.executable, "-m", "django", "drain_queue", *order_queues(shards), *args]


def drain_burst(env: dict[str, str], shards: int = 1) -> None:
    """Run ``drain_queue orders --burst`` in a new process until it exits; it must succeed."""
    recovery = subprocess.run(
        drain_command("--burst", shards=shards),
        check=False,
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert recovery.returncode == 0, recovery.stderr[-3000:]


@pytest.mark.parametrize("shards", [1, 3])
def test_sigkill_mid_flow_leaves_every_sold_unit_with_one_order(
    real: RedisTarget, tmp_path: Path, shards: int
) -> None:
    """With ``shards=3`` the sale runs over 3 buckets (on the cluster, in 3 hash slots), each
    with its own order queue: the same invariants hold for the item as a whole."""
    rng = random.Random()
    db = tmp_path / "shop.sqlite3"
    env = process_env(real, db)
    sale_id = finish(spawn(env, "setup", "--units", "60", "--shards", str(shards))).strip()

    # 1. a buyer process dies somewhere among its take scripts
    buyers = ",".join(f"k{i:03d}" for i in range(200))
    buyer = spawn(
        env, "buy", "--sale", sale_id, "--threads", "4", "--pause", "0.002", "--buyers", buyers
    )
    assert buyer.stdout is not None and buyer.stdout.readline().strip() == "started"
    assert buyer.stdout.readline().startswith("[")  # the first take is done
    kill_at_random(buyer, rng, 0.08)

    # 2. workers die while creating orders (inside or right after the transaction)
    for _ in range(2):
        worker = subprocess.Popen(
            drain_command("--lease", "1", "--batch", "5", shards=shards),
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 30
        while order_count(db) == 0 and worker.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(rng.uniform(0, 0.2))
        worker.send_signal(signal.SIGKILL)
        worker.wait(30)

    # 3. recovery: the leases of the killed worker run out, a new worker drains
    time.sleep(1.2)
    drain_burst(env, shards)

    state = json.loads(finish(spawn(env, "report", "--sale", sale_id)))
    orders = {number: (buyer_id, qty) for number, buyer_id, qty in state["orders"]}
    reservations = {rid: (buyer_id, qty) for rid, buyer_id, qty in state["reservations"]}
    stats = state["stats"]
    assert stats["sold"] > 0, "the buyer process was killed before any take"
    assert orders == reservations  # every sold unit has exactly one order, and no extra
    assert len(state["orders"]) == len(orders)
    assert stats["sold"] == sum(qty for _, qty in reservations.values())
    assert stats["remaining"] + stats["sold"] == 60
    assert len({buyer_id for buyer_id, _ in orders.values()}) == len(orders)
