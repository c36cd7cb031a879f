"""Stock on fakeredis, a real server and a real cluster: takes, refusals, restore, bad input."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from datetime import timezone as dt_timezone
from typing import Any

import pytest
from django.utils import timezone

from django_redislock.exceptions import InvalidArgument, StockNotFound
from django_redislock.inventory import Reservation, Stock, TakeResult
from django_redislock.queue.worker import Worker

from . import inventory_tasks
from .conftest import RedisTarget


def make_stock(target: RedisTarget, item: str = "phone-x", **options: Any) -> Stock:
    backend = target.queue_backend(**options)
    return Stock(item, order_task=inventory_tasks.record_order, using=backend)


def snapshot(stock: Stock) -> tuple[Any, ...]:
    """Everything a refused call must leave unchanged."""
    stats = stock.stats()
    assert stock.queue is not None
    queued = stock.queue.stats()
    return (stats.remaining, stats.taken, stats.buyers, stats.reservations, queued["ready"])


def test_takes_until_sold_out_and_queues_one_order_each(redis_target: RedisTarget) -> None:
    stock = make_stock(redis_target)
    assert stock.set(3) == 3
    takes = [stock.take(buyer=f"user-{i}") for i in range(5)]
    assert [t.result for t in takes] == [TakeResult.OK] * 3 + [TakeResult.SOLD_OUT] * 2
    assert [t.remaining for t in takes] == [2, 1, 0, 0, 0]
    assert stock.remaining() == 0
    reservations = [t.reservation for t in takes if t.reservation is not None]
    assert len({r.id for r in reservations}) == 3
    assert stock.queue is not None
    queued = {task.id: task.payload for task in stock.queue.top(10)}
    assert set(queued) == {r.id for r in reservations}
    first = reservations[0]
    assert queued[first.id] == {
        "task": "tests.inventory_tasks.record_order",
        "args": [],
        "kwargs": {"reservation": {**first.as_dict(), "taken_at": None}},
    }
    assert first.taken_at is not None and first.when is not None
    assert sorted(r.id for r in stock.reservations()) == sorted(r.id for r in reservations)
    stats = stock.stats()
    assert (stats.sold, stats.buyers, stats.reservations, stats.state) == (3, 3, 3, "sold_out")


def test_a_buyer_takes_once_whatever_the_id_type(redis_target: RedisTarget) -> None:
    stock = make_stock(redis_target)
    stock.set(10)
    assert stock.take(buyer=7).ok
    before = snapshot(stock)
    assert stock.take(buyer="7").result is TakeResult.ALREADY_BOUGHT
    assert stock.take(2, buyer=7).result is TakeResult.ALREADY_BOUGHT
    assert snapshot(stock) == before


@pytest.mark.parametrize("variant", [" 7", "7\n", "\t7 ", 7])
def test_whitespace_around_a_buyer_id_is_the_same_buyer(
    redis_target: RedisTarget, variant: Any
) -> None:
    stock = make_stock(redis_target)
    stock.set(10)
    take = stock.take(buyer="7")
    assert take.reservation is not None and take.reservation.buyer == "7"
    before = snapshot(stock)
    assert stock.take(buyer=variant).result is TakeResult.ALREADY_BOUGHT
    assert snapshot(stock) == before
    assert stock.restore(take.reservation)
    again = stock.take(buyer=variant)  # restore freed the normalised id
    assert again.reservation is not None and again.reservation.buyer == "7"
    assert stock.take(buyer="07").ok  # only surrounding whitespace is dropped


def test_quantity_larger_than_what_is_left_is_refused(redis_target: RedisTarget) -> None:
    stock = make_stock(redis_target)
    stock.set(3)
    take = stock.take(2, buyer="a")
    assert take.ok and take.reservation is not None and take.reservation.qty == 2
    before = snapshot(stock)
    refused = stock.take(2, buyer="b")
    assert (refused.result, refused.remaining) == (TakeResult.SOLD_OUT, 1)
    assert refused.reservation is None
    assert snapshot(stock) == before
    assert stock.take(1, buyer="b").remaining == 0


def test_sale_window(redis_target: RedisTarget) -> None:
    stock = make_stock(redis_target)
    now = timezone.now()
    stock.set(5, opens=now + timedelta(hours=1), closes=now + timedelta(hours=2))
    before = snapshot(stock)
    assert stock.take(buyer="early").result is TakeResult.NOT_OPEN
    assert stock.stats().state == "not_open"
    stock.set(5, opens=now - timedelta(hours=2), closes=now - timedelta(hours=1))
    assert stock.take(buyer="late").result is TakeResult.ENDED
    assert stock.stats().state == "ended"
    assert snapshot(stock) == before
    stock.set(5, opens=None)  # closes is kept
    assert stock.take(buyer="late").result is TakeResult.ENDED
    stock.set(5, closes=None)
    assert stock.take(buyer="late").ok
    before = snapshot(stock), stock.stats().closes
    utc = dt_timezone.utc
    for bound in (datetime(1969, 12, 31, 23, 0, tzinfo=utc), datetime(1970, 1, 1, tzinfo=utc)):
        with pytest.raises(InvalidArgument, match="closes must be after 1970"):
            stock.set(5, closes=bound)  # would read as "no end"
        with pytest.raises(InvalidArgument, match="opens must be after 1970"):
            stock.set(5, opens=bound)
    with pytest.raises(InvalidArgument, match="before 2255"):
        stock.set(5, closes=datetime(9999, 1, 1, tzinfo=utc))
    assert (snapshot(stock), stock.stats().closes) == before
    stats = stock.stats()
    assert stats.opens is None and stats.closes is None and stats.state == "open"


def test_unknown_item(redis_target: RedisTarget) -> None:
    stock = make_stock(redis_target, "never-set")
    take = stock.take(buyer="a")
    assert (take.result, take.remaining, take.reservation) == (TakeResult.UNKNOWN, 0, None)
    with pytest.raises(StockNotFound, match="never-set"):
        stock.remaining()
    with pytest.raises(StockNotFound):
        stock.add(5)
    assert stock.stats().state == "unknown"
    assert stock.queue is not None and stock.queue.stats()["ready"] == 0


@pytest.mark.parametrize(
    ("kwargs", "argument"),
    [
        ({"qty": 0, "buyer": "a"}, "qty"),
        ({"qty": -1, "buyer": "a"}, "qty"),
        ({"qty": 1.5, "buyer": "a"}, "qty"),
        ({"qty": True, "buyer": "a"}, "qty"),
        ({"qty": "1", "buyer": "a"}, "qty"),
        ({"buyer": ""}, "buyer"),
        ({"buyer": "   "}, "buyer"),
        ({"buyer": None}, "buyer"),
        ({"buyer": 1.0}, "buyer"),
        ({"buyer": b"a"}, "buyer"),
        ({"buyer": True}, "buyer"),
        ({"buyer": "x" * 201}, "buyer"),
        ({"buyer": "a", "data": ["not", "a", "dict"]}, "data"),
        ({"buyer": "a", "data": {"not": object()}}, "data: payload is not JSON"),
        ({"buyer": "a", "data": {"big": "x" * 70_000}}, "data is 70010 bytes as JSON, over 65536"),
        ({"buyer": " \n "}, "buyer"),
    ],
)
def test_bad_take_arguments_change_nothing(
    redis_target: RedisTarget, kwargs: dict[str, Any], argument: str
) -> None:
    stock = make_stock(redis_target)
    stock.set(5)
    before = snapshot(stock)
    with pytest.raises(InvalidArgument, match=argument):
        stock.take(**kwargs)
    assert snapshot(stock) == before


@pytest.mark.parametrize("item", ["", "a{b}", 5, None, "x" * 201])
def test_bad_item_names(item: Any) -> None:
    with pytest.raises(InvalidArgument, match="item"):
        Stock(item)


def test_the_order_task_must_be_a_registered_task() -> None:
    with pytest.raises(InvalidArgument, match="order_task"):
        Stock("x", order_task=print)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match="name"):
        Stock("x", order_task=inventory_tasks.record_order, queue="a{b}")


def test_bad_set_and_add_arguments(redis_target: RedisTarget) -> None:
    stock = make_stock(redis_target)
    stock.set(5)
    for call in (
        lambda: stock.set(-1),
        lambda: stock.set(2.5),  # type: ignore[arg-type]
        lambda: stock.add(0),
        lambda: stock.set(5, opens="tomorrow"),
        lambda: stock.restore(""),
        lambda: stock.restore(Reservation("other", "id", "a", 1)),
    ):
        with pytest.raises(InvalidArgument):
            call()
    assert stock.remaining() == 5
    assert stock.add(3) == 8


def test_restore_is_idempotent_and_drops_the_waiting_order(redis_target: RedisTarget) -> None:
    stock = make_stock(redis_target)
    stock.set(1)
    take = stock.take(buyer="a")
    assert take.reservation is not None
    assert stock.reservation(take.reservation.id) == take.reservation
    assert stock.restore(take.reservation) is True
    assert stock.restore(take.reservation) is False
    assert stock.restore(take.reservation.id) is False
    assert stock.remaining() == 1
    assert stock.reservation(take.reservation.id) is None
    assert stock.queue is not None and stock.queue.stats()["ready"] == 0
    stats = stock.stats()
    assert (stats.taken, stats.restored, stats.sold, stats.buyers) == (1, 1, 0, 0)
    again = stock.take(buyer="a")  # the buyer may buy again
    assert again.ok and again.reservation is not None
    assert again.reservation.id != take.reservation.id


def test_restore_without_rebuy_keeps_the_buyer_out(redis_target: RedisTarget) -> None:
    stock = make_stock(redis_target)
    stock.set(2)
    take = stock.take(buyer="a")
    assert take.reservation is not None
    assert stock.restore(take.reservation, rebuy=False)
    assert stock.take(buyer="a").result is TakeResult.ALREADY_BOUGHT
    assert stock.remaining() == 2


def test_restore_drops_an_order_task_in_flight(redis_target: RedisTarget) -> None:
    stock = make_stock(redis_target)
    stock.set(1)
    take = stock.take(buyer="a")
    assert take.reservation is not None and stock.queue is not None
    [claimed] = stock.queue.pop(lease=1)
    assert stock.restore(take.reservation)
    assert stock.queue.get(claimed.id) is None  # the running attempt's lease hands out nothing
    assert stock.queue.ack(claimed) == 0
    assert stock.queue.retry(claimed, delay=0) == "lost"
    assert stock.queue.get(claimed.id) is None


def test_restore_of_a_claimed_order_task_leaves_no_claim_behind(redis_target: RedisTarget) -> None:
    stock = make_stock(redis_target)
    stock.set(1)
    take = stock.take(buyer="a")
    assert take.reservation is not None and stock.queue is not None
    [claimed] = stock.queue.pop(lease=30)
    claims = stock.queue.claims_key
    assert redis_target.raw.hexists(claims, claimed.id)
    assert stock.restore(take.reservation)
    assert not redis_target.raw.hexists(claims, claimed.id)  # no field left for a gone task


def test_restore_drops_a_dead_order_task_so_a_requeue_cannot_sell_twice(
    redis_target: RedisTarget,
) -> None:
    stock = make_stock(redis_target)
    stock.set(1)
    first = stock.take(buyer="a")
    assert first.reservation is not None and stock.queue is not None
    [claimed] = stock.queue.pop()
    assert stock.queue.retry(claimed, error="database down", max_attempts=1) == "dead"
    assert stock.restore(first.reservation)
    second = stock.take(buyer="b")  # the unit is sold again
    assert second.ok and second.reservation is not None
    assert stock.queue.requeue_dead() == 0  # the first order task is gone, not dead
    assert [t.id for t in stock.queue.top(5)] == [second.reservation.id]
    assert stock.queue.stats()["dead"] == 0


@pytest.mark.django_db  # the worker closes stale database connections around each task
def test_drained_orders_get_their_reservations(redis_target: RedisTarget) -> None:
    inventory_tasks.ORDERS.clear()
    stock = make_stock(redis_target)
    stock.set(4)
    takes = [stock.take(buyer=f"b{i}", data={"sale": 7}) for i in range(6)]
    assert stock.queue is not None
    summary = Worker([stock.queue], burst=True, timeout=10).run()
    assert (summary.succeeded, summary.failed) == (4, 0)
    made = {r["id"]: Reservation.from_dict(r) for r in inventory_tasks.ORDERS}
    expected = {t.reservation.id: t.reservation for t in takes if t.reservation is not None}
    assert set(made) == set(expected)
    for rid, reservation in made.items():
        assert reservation.data == {"sale": 7}
        assert reservation.buyer == expected[rid].buyer and reservation.qty == 1
    assert stock.queue.stats()["ready"] == 0


def test_keys_share_the_order_queues_slot(redis_target: RedisTarget) -> None:
    stock = make_stock(redis_target)
    assert stock.queue is not None
    keys = stock.keys(with_queue=True)
    assert keys[4:] == list(stock.queue.keys)
    assert len({key.split("}")[0] for key in keys}) == 1
    if redis_target.kind == "cluster":
        slots = {redis_target.raw.keyslot(key) for key in keys}
        assert len(slots) == 1


def test_a_stock_without_order_task(redis_target: RedisTarget) -> None:
    stock = Stock("plain", using=redis_target.queue_backend())
    stock.set(1)
    with pytest.raises(InvalidArgument, match="data: payload is not JSON"):
        stock.take(buyer="a", data={"when": object()})
    with pytest.raises(InvalidArgument, match="data must be a dict"):
        stock.take(buyer="a", data=["x"])  # type: ignore[arg-type]
    assert stock.remaining() == 1
    take = stock.take(buyer="a", data={"sale": 7})
    assert take.reservation is not None and take.reservation.data == {"sale": 7}
    assert take.ok and stock.queue is None
    assert stock.keys()[0].endswith("{stock:plain}:units")
    assert take.reservation is not None and stock.restore(take.reservation)
    assert stock.remaining() == 1


def test_eager_mode_runs_the_order_inline(redis_target: RedisTarget) -> None:
    inventory_tasks.ORDERS.clear()
    stock = make_stock(redis_target, EAGER=True)
    stock.set(1)
    take = stock.take(buyer="a")
    assert take.reservation is not None
    assert [r["id"] for r in inventory_tasks.ORDERS] == [take.reservation.id]
    assert stock.queue is not None and stock.queue.stats()["ready"] == 0


def test_async_twins(redis_target: RedisTarget) -> None:
    stock = make_stock(redis_target)
    stock.set(2)

    async def scenario() -> list[Any]:
        first = await stock.take_async(buyer="a")
        second = await stock.take_async(buyer="a")
        assert first.reservation is not None
        restored = await stock.restore_async(first.reservation)
        again = await stock.restore_async(first.reservation)
        stats = await stock.stats_async()
        return [
            first.result,
            second.result,
            restored,
            again,
            await stock.remaining_async(),
            stats.restored,
        ]

    assert asyncio.run(scenario()) == [TakeResult.OK, TakeResult.ALREADY_BOUGHT, True, False, 2, 1]


def test_clear(redis_target: RedisTarget) -> None:
    stock = make_stock(redis_target)
    stock.set(2)
    stock.take(buyer="a")
    assert stock.clear() is True
    assert stock.take(buyer="a").result is TakeResult.UNKNOWN
    assert stock.clear() is False
