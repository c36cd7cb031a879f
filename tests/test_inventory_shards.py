"""A stock split over buckets (``set(units, shards=N)``): layout, the sweep, dedup, restore, load.

The concurrency tests run on a real server and on the 3-master cluster: threads of one
process and buyer processes, more buyers than units, every buyer trying twice.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import pytest

from django_redislock.exceptions import InvalidArgument
from django_redislock.inventory import Stock, Take, TakeResult, buckets, sold_out
from django_redislock.inventory.shards import claim_call, home_bucket, refused_here, split
from django_redislock.queue.worker import Worker

from . import inventory_tasks
from .conftest import RedisTarget


def make_stock(target: RedisTarget, item: str = "phone-s", **options: Any) -> Stock:
    return Stock(
        item, order_task=inventory_tasks.record_order, using=target.queue_backend(**options)
    )


def homed(index: int, shards: int, count: int, prefix: str = "u") -> list[str]:
    """``count`` buyer ids whose home bucket is ``index``."""
    found = [f"{prefix}{n}" for n in range(10_000) if home_bucket(f"{prefix}{n}", shards) == index]
    return found[:count]


def bucket_units(stock: Stock) -> list[int]:
    return [part.remaining for part in stock.bucket_stats()]


def queued(stock: Stock) -> dict[str, int]:
    """Order tasks waiting in each bucket's order queue."""
    backend = stock.backend
    return {name: backend.queue(name).stats()["ready"] for name in stock.order_queues()}


def test_one_bucket_keeps_the_old_key_names(redis_target: RedisTarget) -> None:
    for shards in (None, 1):
        stock = make_stock(redis_target, item=f"old-{shards}")
        assert (stock.set(3) if shards is None else stock.set(3, shards=shards)) == 3
        tag = stock.backend.key_prefix + ":{q:orders}:stock:" + stock.item
        assert stock.keys() == [f"{tag}:{part}" for part in KEY_PARTS]
        assert stock.shards() == 1 and stock.order_queues() == ["orders"]
        take = stock.take(buyer="a")
        assert take.reservation is not None and len(take.reservation.id) == 32
        assert take.reservation.bucket == 0
        assert redis_target.raw.hgetall(stock.keys()[1]).keys() == {b"taken"}
        found = {key.decode() for key in redis_target.raw.scan_iter(match=f"{tag}:*")}
        assert {key for key in found if ":req:" not in key} == set(stock.keys())
    plain = Stock("plain-old", using=redis_target.queue_backend())
    plain.set(1, shards=1)
    assert plain.keys()[0] == plain.backend.key_prefix + ":{stock:plain-old}:units"


KEY_PARTS = ("units", "meta", "buyers", "reservations")


def test_a_sharded_set_lists_every_bucket_order_queue_before_any_take(
    redis_target: RedisTarget,
) -> None:
    """``drain_queue orders orders.s1 orders.s2`` started before the first take (workers run
    before a sale opens) must find its queues listed: it refuses a name it does not know."""
    stock = make_stock(redis_target, item="listed")
    stock.set(6, shards=3)
    assert make_stock(redis_target).backend.queue_names() == ["orders", "orders.s1", "orders.s2"]


def test_refusals_are_counted_in_the_bucket_that_refused(redis_target: RedisTarget) -> None:
    """The admin's per-bucket refusals: a duplicate found by a bucket's take or by the claim
    of a sweep counts in that bucket; a sold-out answer is counted by the process, at its
    next flush (tests/test_inventory_sold_out_counts.py)."""
    stock = make_stock(redis_target, item="refusals")
    stock.set(3, shards=3)  # one unit per bucket
    first = homed(1, 3, 2)
    assert stock.take(buyer=first[0]).ok
    assert stock.take(buyer=first[0]).result is TakeResult.ALREADY_BOUGHT  # by the claim
    assert stock.take(buyer=first[1]).ok  # swept to another bucket
    assert [part.refused["duplicate"] for part in stock.bucket_stats()] == [0, 1, 0]
    assert stock.stats().refused == {
        "duplicate": 1,
        "not_open": 0,
        "ended": 0,
        "admission": 0,
        "sold_out_redis": 0,
        "sold_out_local": 0,
    }


def test_units_split_over_buckets_each_in_its_own_slot(redis_target: RedisTarget) -> None:
    stock = make_stock(redis_target)
    assert stock.set(10, shards=3) == 10
    assert bucket_units(stock) == [4, 3, 3] == split(10, 3)
    assert stock.shards() == 3 and stock.remaining() == 10
    assert stock.order_queues() == ["orders", "orders.s1", "orders.s2"]
    assert stock.bucket(0).keys() == stock.keys()
    prefix = stock.backend.key_prefix
    assert stock.bucket(2).keys()[0] == prefix + ":{q:orders.s2}:stock:phone-s:units"
    tags = {stock.bucket(i).keys()[0].split("}")[0] for i in range(3)}
    assert len(tags) == 3
    if redis_target.kind == "cluster":
        for index in range(3):
            bucket = stock.bucket(index)
            assert bucket.queue is not None
            slots = {redis_target.raw.keyslot(key) for key in bucket.keys(with_queue=True)}
            assert len(slots) == 1
    plain = Stock("plain", using=redis_target.queue_backend())
    plain.set(2, shards=2)
    assert plain.bucket(1).keys()[0] == prefix + ":{stock.s1:plain}:units"
    assert plain.order_queues() == []
    # a new object of the same item finds the number of buckets in Redis
    again = make_stock(redis_target)
    assert again.shards() == 3 and again.stats().remaining == 10


def test_the_number_of_buckets_is_fixed_until_clear(redis_target: RedisTarget) -> None:
    stock = make_stock(redis_target)
    stock.set(6, shards=3)
    with pytest.raises(InvalidArgument, match="split over 3 bucket"):
        stock.set(6, shards=2)
    with pytest.raises(InvalidArgument, match="shards must be an int"):
        stock.set(6, shards=0)
    assert stock.set(9) == 9 and bucket_units(stock) == [3, 3, 3]  # keeps 3
    assert stock.add(4) == 13 and bucket_units(stock) == [5, 4, 4]
    assert stock.clear() is True
    assert not stock.stats().exists
    assert stock.set(2, shards=2) == 2 and make_stock(redis_target).shards() == 2


def test_a_buyer_moves_on_when_home_is_sold_out_and_buys_once(redis_target: RedisTarget) -> None:
    stock = make_stock(redis_target)
    stock.set(3, shards=3)  # one unit per bucket
    first, second, third = homed(0, 3, 3)
    assert stock.take(buyer=first).reservation.bucket == 0  # type: ignore[union-attr]
    moved = stock.take(buyer=second)
    assert moved.ok and moved.reservation is not None
    assert moved.reservation.bucket != 0 and moved.reservation.id.endswith(
        f"-b{moved.reservation.bucket}"
    )
    # again: its home (sold out) still knows it, whichever bucket has units
    assert stock.take(buyer=second).result is TakeResult.ALREADY_BOUGHT
    assert stock.take(buyer=f" {second}\n").result is TakeResult.ALREADY_BOUGHT
    assert stock.take(buyer=third).ok
    assert bucket_units(stock) == [0, 0, 0]
    late = stock.take(buyer=homed(1, 3, 1, "late")[0])
    assert (late.result, late.remaining) == (TakeResult.SOLD_OUT, 0)
    # sold out is answered first, as by a stock of one bucket
    assert stock.take(buyer=second).result is TakeResult.SOLD_OUT
    # the unit goes back to the bucket it came from, and the buyer may buy again
    assert stock.restore(moved.reservation.id)
    units = [0, 0, 0]
    units[moved.reservation.bucket] = 1
    assert bucket_units(stock) == units
    assert stock.reservation(moved.reservation.id) is None
    again = stock.take(buyer=second)
    assert again.ok and again.reservation is not None
    assert again.reservation.bucket == moved.reservation.bucket
    assert stock.restore(again.reservation, rebuy=False)
    assert stock.take(buyer=second).result is TakeResult.ALREADY_BOUGHT
    assert stock.reconcile().clean
    stats = stock.stats()
    assert (stats.remaining, stats.sold, stats.reservations) == (1, 2, 2)


def test_a_refusal_other_than_sold_out_releases_the_claim(redis_target: RedisTarget) -> None:
    stock = make_stock(redis_target)
    stock.set(2, shards=2)
    home, other = homed(0, 2, 1)[0], homed(1, 2, 1)[0]
    assert stock.take(buyer=homed(0, 2, 2)[1]).ok  # bucket 0 is sold out
    stock.bucket(1).clear()  # bucket 1 is gone: UNKNOWN, the sweep stops there
    assert stock.take(buyer=home).result is TakeResult.UNKNOWN
    stock.bucket(1).set(1)
    assert stock.take(buyer=home).ok  # its claim was released
    assert stock.take(buyer=other).result is TakeResult.SOLD_OUT


@pytest.mark.django_db  # the worker closes stale database connections around each task
def test_orders_are_queued_per_bucket_and_one_worker_drains_them(redis_target: RedisTarget) -> None:
    inventory_tasks.ORDERS.clear()
    stock = make_stock(redis_target)
    stock.set(7, shards=3)
    takes = [stock.take(buyer=f"w{i}", data={"n": i}) for i in range(10)]
    sold = [take.reservation for take in takes if take.reservation is not None]
    assert len(sold) == 7 and bucket_units(stock) == [0, 0, 0]
    by_bucket = Counter(reservation.bucket for reservation in sold)
    assert queued(stock) == {
        name: by_bucket[index] for index, name in enumerate(stock.order_queues())
    }
    queues = [stock.backend.queue(name) for name in stock.order_queues()]
    summary = Worker(queues, burst=True, timeout=10).run()
    assert (summary.succeeded, summary.failed) == (7, 0)
    assert sorted(order["id"] for order in inventory_tasks.ORDERS) == sorted(r.id for r in sold)


def test_restore_drops_the_order_task_from_its_bucket_queue(redis_target: RedisTarget) -> None:
    stock = make_stock(redis_target)
    stock.set(2, shards=2)
    home = homed(0, 2, 2)
    assert stock.take(buyer=home[0]).ok
    moved = stock.take(buyer=home[1])
    assert moved.reservation is not None and moved.reservation.bucket == 1
    assert queued(stock) == {"orders": 1, "orders.s1": 1}
    assert stock.restore(moved.reservation)
    assert queued(stock) == {"orders": 1, "orders.s1": 0}
    assert bucket_units(stock) == [0, 1]


def test_a_sweep_that_found_every_bucket_sold_out_is_remembered(
    redis_target: RedisTarget,
) -> None:
    stock = make_stock(redis_target)
    stock.set(2, shards=2)
    assert stock.take(buyer="a").ok and stock.take(buyer="b").ok
    assert refused_here(stock, 2, 1) is None
    assert stock.take(buyer="c").result is TakeResult.SOLD_OUT
    assert refused_here(stock, 2, 1) == Take(TakeResult.SOLD_OUT, 0)
    taken = [r for r in stock.reservations()]
    assert stock.restore(taken[0].id)  # this process's own change: that bucket is forgotten
    assert refused_here(stock, 2, 1) is None
    assert stock.take(buyer="c").ok
    sold_out.memory.clear()


def test_async_takes_and_restores_across_buckets(redis_target: RedisTarget) -> None:
    async def sale() -> None:
        stock = make_stock(redis_target)
        stock.set(3, shards=3)
        buyers = homed(2, 3, 4)
        takes = [await stock.take_async(buyer=buyer) for buyer in buyers]
        assert [take.result for take in takes] == [TakeResult.OK] * 3 + [TakeResult.SOLD_OUT]
        assert {take.reservation.bucket for take in takes[:3]} == {0, 1, 2}  # type: ignore[union-attr]
        assert (await stock.take_async(buyer=buyers[1])).result is TakeResult.SOLD_OUT
        moved = next(
            take.reservation for take in takes if take.reservation and take.reservation.bucket != 2
        )
        assert await stock.restore_async(moved.id)
        assert await stock.remaining_async() == 1
        assert (await stock.take_async(buyer=moved.buyer)).ok
        assert (await stock.stats_async()).remaining == 0

    asyncio.run(sale())


# -- under load ------------------------------------------------------------------------------------


def check_the_sale(stock: Stock, takes: list[Take], units: int) -> None:
    """0 oversold, 0 left anywhere, one unit per buyer, one order per unit in its bucket."""
    sold = [take.reservation for take in takes if take.reservation is not None]
    assert len(sold) == units  # all sold, none oversold
    assert len({reservation.buyer for reservation in sold}) == units  # one per buyer
    assert bucket_units(stock) == [0] * stock.shards()
    by_bucket = Counter(reservation.bucket for reservation in sold)
    assert queued(stock) == {
        name: by_bucket[index] for index, name in enumerate(stock.order_queues())
    }
    assert [part.taken for part in stock.bucket_stats()] == [
        by_bucket[index] for index in range(stock.shards())
    ]
    found = stock.reconcile()
    assert found.clean and (found.reserved, found.remaining) == (units, 0)
    refusals = Counter(take.result for take in takes if not take.ok)
    assert set(refusals) <= {TakeResult.SOLD_OUT, TakeResult.ALREADY_BOUGHT}


@pytest.fixture(params=["single", "cluster"])
def real_target(request: pytest.FixtureRequest) -> RedisTarget:
    target: RedisTarget = request.getfixturevalue(f"{request.param}_target")
    return target


def test_threads_sell_every_unit_of_every_bucket_once(real_target: RedisTarget) -> None:
    stock = make_stock(real_target, item="crowd")
    units, buyers, threads = 40, 100, 8
    stock.set(units, shards=3)
    takes: list[Take] = []
    lock = threading.Lock()
    start = threading.Barrier(threads)

    def crowd(offset: int) -> None:
        start.wait(timeout=30)
        for n in range(offset, buyers, threads):
            for _ in range(2):  # every buyer tries twice
                take = stock.take(buyer=f"t{n}")
                with lock:
                    takes.append(take)

    workers = [threading.Thread(target=crowd, args=(i,)) for i in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=120)
    assert not any(worker.is_alive() for worker in workers)
    assert len(takes) == 2 * buyers
    check_the_sale(stock, takes, units)
    # a restore under load goes back to its bucket and sells again, once
    sold = [take.reservation for take in takes if take.reservation is not None]
    given_back = sold[: 3 * 2 : 2]
    for reservation in given_back:
        assert stock.restore(reservation)
    back = Counter(reservation.bucket for reservation in given_back)
    assert bucket_units(stock) == [back[index] for index in range(3)]  # each to its bucket
    assert stock.remaining() == len(given_back)
    again = [stock.take(buyer=f"late{n}") for n in range(20)]
    assert sum(take.ok for take in again) == len(given_back)
    assert bucket_units(stock) == [0] * 3
    sold_out.memory.clear()


def buy_in_process(location: dict[str, Any], first: int, count: int) -> list[tuple[str, Any]]:
    """A buyer process: every buyer of its range tries twice; (result, reservation dict)."""
    from django_redislock.backends.redis import RedisQueueBackend

    backend = RedisQueueBackend("test", location)
    stock = Stock("procs", order_task=inventory_tasks.record_order, using=backend)
    out = []
    for n in range(first, first + count):
        for _ in range(2):
            take = stock.take(buyer=f"p{n}")
            out.append((take.result.value, take.reservation and take.reservation.as_dict()))
    return out


def test_processes_sell_every_unit_of_every_bucket_once(real_target: RedisTarget) -> None:
    from django_redislock.inventory import Reservation

    stock = make_stock(real_target, item="procs")
    units, buyers, processes = 30, 80, 2
    stock.set(units, shards=3)
    location = real_target.params()
    share = buyers // processes
    with ProcessPoolExecutor(processes) as pool:
        jobs = [pool.submit(buy_in_process, location, i * share, share) for i in range(processes)]
        results = [row for job in jobs for row in job.result(timeout=120)]
    takes = [
        Take(TakeResult(result), 0, None if found is None else Reservation.from_dict(found))
        for result, found in results
    ]
    assert len(takes) == 2 * buyers
    check_the_sale(stock, takes, units)


def test_a_resent_claim_or_release_answers_as_the_first_time(redis_target: RedisTarget) -> None:
    stock = make_stock(redis_target)
    stock.set(2, shards=2)
    home = stock.bucket(1)
    claim = claim_call("buyer-r", True)
    assert home._run(claim) is True
    assert home._run(claim) is True  # the same request again: its first answer, no change
    assert home._run(claim_call("buyer-r", True)) is False  # a new claim: already there
    release = claim_call("buyer-r", False)
    assert home._run(release) is True and home._run(release) is True
    assert home._run(claim_call("buyer-r", False)) is False
    assert home.stats().buyers == 0


def test_a_stock_per_request_reads_its_number_of_buckets_once(
    redis_target: RedisTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A shop builds a ``Stock`` per request: the number of buckets is kept per process.

    Read per object, it cost every take a second round trip (an ``HGET`` before the take).
    """
    backend = redis_target.queue_backend()
    sharded = Stock("per-request-s", order_task=inventory_tasks.record_order, using=backend)
    sharded.set(40, shards=2)
    Stock("per-request-1", order_task=inventory_tasks.record_order, using=backend).set(40)
    client: Any = backend.client
    reads: list[Any] = []
    hget = client.hget

    def counted(*args: Any) -> Any:
        reads.append(args)
        return hget(*args)

    monkeypatch.setattr(client, "hget", counted)
    for item in ("per-request-s", "per-request-1"):
        for n in range(5):
            stock = Stock(item, order_task=inventory_tasks.record_order, using=backend)
            assert stock.take(buyer=f"b{n}").ok
    assert len(reads) <= 1  # the sharded one was known from its set(); the other read once


@pytest.mark.parametrize("kind", ["single"])
def test_a_change_published_by_another_process_forgets_the_number(
    kind: str, request: pytest.FixtureRequest
) -> None:
    target: RedisTarget = request.getfixturevalue(f"{kind}_target")
    here, there = target.queue_backend(), target.queue_backend()  # two processes' backends
    item = "republished"
    mine = Stock(item, order_task=inventory_tasks.record_order, using=here)
    mine.set(1)
    assert mine.take(buyer="a").ok
    assert mine.take(buyer="b").result is TakeResult.SOLD_OUT  # starts this process's listener
    listener = sold_out.memory.listeners[id(here)]
    assert listener.subscribed.wait(30)
    assert mine.shards() == 1
    theirs = Stock(item, order_task=inventory_tasks.record_order, using=there)
    theirs.clear()
    theirs.set(4, shards=2)
    deadline = time.monotonic() + 30
    while (id(here), mine.keys()[1]) in buckets.counts and time.monotonic() < deadline:
        time.sleep(0.01)
    fresh = Stock(item, order_task=inventory_tasks.record_order, using=here)
    assert fresh.shards() == 2
    assert fresh.take(buyer="c").ok and fresh.take(buyer="d").ok
