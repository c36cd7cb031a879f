"""Admission before the take: ``Stock(admission=..., buyer_admission=...)`` (issue 27, item 3).

The limits are GCRA in the take script itself (no extra round trip): a take is refused with
``RATE_LIMITED`` and ``retry_after`` when the item's or the buyer's limit is full, and only a
take that takes is charged. The limits are a minute apart ("1/m"), so no assertion depends
on how fast a loaded machine runs the test.
"""

from __future__ import annotations

import pytest

from django_redislock.exceptions import InvalidArgument
from django_redislock.inventory import Stock, TakeResult

from . import inventory_tasks
from .conftest import RedisTarget


def make_stock(target: RedisTarget, item: str, **limits: str) -> Stock:
    stock = Stock(
        item, order_task=inventory_tasks.record_order, using=target.queue_backend(), **limits
    )
    stock.set(10)
    return stock


def test_the_item_limit_admits_its_burst_then_refuses_with_a_wait(
    redis_target: RedisTarget,
) -> None:
    stock = make_stock(redis_target, "adm-item", admission="20/m")  # burst 1 (0.1 s worth)
    assert stock.take(buyer="a").ok
    refused = stock.take(buyer="b")
    assert refused.result is TakeResult.RATE_LIMITED and 1 < refused.retry_after <= 3
    assert refused.remaining == 9 and not refused
    stats = stock.stats()
    assert (stats.remaining, stats.taken, stats.buyers) == (9, 1, 1)  # nothing recorded
    assert stock.queue is not None and stock.queue.stats()["ready"] == 1


def test_the_buyer_limit_is_per_buyer(redis_target: RedisTarget) -> None:
    stock = make_stock(redis_target, "adm-buyer", buyer_admission="1/m")
    assert stock.take(buyer="a").ok
    stock.restore(next(iter(stock.reservations())))  # a may buy again, but not yet
    assert stock.take(buyer="a").result is TakeResult.RATE_LIMITED
    assert stock.take(buyer="b").ok  # another buyer's own limit


def test_a_refused_take_charges_no_admission(redis_target: RedisTarget) -> None:
    stock = make_stock(redis_target, "adm-charge", admission="1/m", buyer_admission="1/m")
    assert stock.take(buyer="a").ok
    stock.set(10)
    assert stock.take(buyer="a").result is TakeResult.RATE_LIMITED  # the item limit first
    other = make_stock(redis_target, "adm-charge-2", admission="1/m")
    other.set(0)
    assert other.take(buyer="x").result is TakeResult.SOLD_OUT  # before the admission
    other.set(1)
    assert other.take(buyer="x").ok  # the sold-out refusal was not charged


def test_a_resent_take_is_admitted_and_charged_once(redis_target: RedisTarget) -> None:
    stock = make_stock(redis_target, "adm-resend", admission="1/m")
    call = stock._take_call(1, "a", None)
    first = stock._run(call)
    again = stock._run(call)  # the reply was lost; the client sends it again
    assert first.ok and again.ok and again.remaining == first.remaining == 9
    assert stock.take(buyer="b").result is TakeResult.RATE_LIMITED


def test_bad_limits_name_their_argument() -> None:
    with pytest.raises(InvalidArgument, match="admission"):
        Stock("adm-bad", admission="lots")
    with pytest.raises(InvalidArgument, match="buyer_admission"):
        Stock("adm-bad", buyer_admission="1 per second")
