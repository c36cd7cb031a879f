"""``Stock.reconcile`` and ``manage.py reconcile_stock`` (issue 27, item 4).

Drift cannot come from the scripts (each writes the counters, buyers and records in one
step); it comes from outside them: a hand edit, a restore of an old backup of one key, a
bug. Here a raw client makes it, and the check must find exactly it and the fix undo it.
"""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.test import override_settings

from django_redislock.inventory import Stock

from . import inventory_tasks
from .conftest import RedisTarget


def sold(target: RedisTarget, item: str) -> Stock:
    stock = Stock(item, order_task=inventory_tasks.record_order, using=target.queue_backend())
    stock.set(10)
    for buyer in ("a", "b", "c"):
        assert stock.take(2 if buyer == "b" else 1, buyer=buyer).ok
    first = next(iter(stock.reservations()))
    assert stock.restore(first)
    return stock


def test_books_that_agree_are_clean(redis_target: RedisTarget) -> None:
    stock = sold(redis_target, "rec-clean")
    found = stock.reconcile()
    assert found.clean and not found.fixed
    assert found.taken == 4 and found.restored + found.reserved == 4  # one of 1 or 2 back
    assert found.reservations == 2 and found.remaining == 10 - found.reserved


def test_drift_is_found_then_fixed_once(redis_target: RedisTarget) -> None:
    stock = sold(redis_target, "rec-drift")
    _, meta, buyers, _ = stock.keys()
    live = list(stock.reservations())
    redis_target.raw.hincrby(meta, "taken", 3)  # a counter off by 3
    redis_target.raw.srem(buyers, live[0].buyer)  # a holder missing from the buyers set
    found = stock.reconcile()
    assert (found.drift, found.missing_buyers, found.fixed) == (3, 1, False)
    fixed = stock.reconcile(fix=True)
    assert fixed.fixed and (fixed.drift, fixed.missing_buyers) == (3, 1)  # what it fixed
    after = stock.reconcile()
    assert after.clean and not after.fixed
    assert redis_target.raw.sismember(buyers, live[0].buyer)


def test_a_stock_never_set_is_reported_as_missing(redis_target: RedisTarget) -> None:
    found = Stock("rec-none", queue="orders", using=redis_target.queue_backend()).reconcile()
    assert not found.exists


def test_the_command_reports_fixes_and_exits_non_zero_on_drift(
    single_target: RedisTarget,
) -> None:
    alias = {**single_target.params(), "KEY_PREFIX": "rec"}
    with override_settings(REDISLOCK_QUEUES={"default": alias}):
        stock = Stock("rec-cmd", queue="orders")
        stock.set(5)
        assert stock.take(buyer="a").ok
        out = StringIO()
        call_command("reconcile_stock", "rec-cmd", "--queue", "orders", stdout=out)
        assert "agree" in out.getvalue()
        single_target.raw.hincrby(stock.keys()[1], "taken", -1)
        with pytest.raises(CommandError, match="--fix"):
            call_command("reconcile_stock", "rec-cmd", "--queue", "orders", stdout=StringIO())
        out = StringIO()
        call_command("reconcile_stock", "rec-cmd", "--queue", "orders", "--fix", stdout=out)
        assert "Fixed: the taken counter is off by -1" in out.getvalue()
        with pytest.raises(CommandError, match="never set"):
            call_command("reconcile_stock", "rec-cmd", stdout=StringIO())  # no queue: other keys
