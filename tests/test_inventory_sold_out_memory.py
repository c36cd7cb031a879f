"""Sold out without Redis: a process refuses a sold-out stock from memory until it changes.

Two backend objects on one server stand for two processes (each has its own connections,
its own listener and its own entries in the memory, which is keyed by backend). Every wait
is for an event (the listener subscribed, a change received) with a generous deadline.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from django_redislock.inventory import Stock, TakeResult, sold_out
from django_redislock.inventory.sold_out import memory

from . import inventory_tasks
from .conftest import RedisTarget
from .processes import wait_for
from .test_inventory_sold_out import node_of, server_commands

DEADLINE = 10.0


def make_stock(target: RedisTarget, item: str, backend: Any = None) -> Stock:
    backend = backend or target.queue_backend()
    return Stock(item, order_task=inventory_tasks.record_order, using=backend)


def sell_out(stock: Stock) -> None:
    """Take the last unit, then have a refusal remembered while the listener is subscribed."""
    stock.set(1)
    assert stock.take(buyer="first").ok
    assert stock.take(buyer="late-0").result is TakeResult.SOLD_OUT  # starts the listener
    listener = memory.listeners[id(stock.backend)]
    assert listener.subscribed.wait(DEADLINE)
    memo = (id(stock.backend), stock.keys()[0])

    def tracked() -> bool:
        # refused from memory until the untracked answer ages out, then asked: tracked
        assert stock.take(buyer="late-1").result is TakeResult.SOLD_OUT
        return memory.entries[memo].listener is listener

    wait_for(tracked, DEADLINE, "a refusal remembered while the listener is subscribed")


def test_a_remembered_sell_out_is_answered_with_no_redis_call(redis_target: RedisTarget) -> None:
    if redis_target.kind == "fakeredis":
        pytest.skip("fakeredis keeps no command statistics")
    stock = make_stock(redis_target, "memory-zero")
    sell_out(stock)
    node = node_of(redis_target, stock.keys()[0])
    node.config_resetstat()
    for buyer in ("a", "b", "c"):
        refused = stock.take(buyer=buyer)
        assert (refused.result, refused.remaining) == (TakeResult.SOLD_OUT, 0)
    refused = asyncio.run(stock.take_async(buyer="d"))
    assert refused.result is TakeResult.SOLD_OUT
    setup = ("cmdstat_info", "cmdstat_config|resetstat")
    assert {name: n for name, n in server_commands(node).items() if name not in setup} == {}
    stats = stock.stats()
    assert (stats.remaining, stats.taken, stats.buyers) == (0, 1, 1)


def test_more_units_than_remembered_are_refused_and_fewer_are_asked(
    redis_target: RedisTarget,
) -> None:
    stock = make_stock(redis_target, "memory-qty")
    stock.set(3)
    assert stock.take(2, buyer="first").ok
    assert stock.take(2, buyer="second").result is TakeResult.SOLD_OUT  # 1 left: remembered
    assert stock.take(5, buyer="third").remaining == 1  # refused from memory: needs more
    assert stock.take(1, buyer="fourth").ok  # one unit is not sold out: asked, and taken


@pytest.mark.parametrize("change", ["restore", "add", "set", "clear"])
def test_another_process_bringing_units_back_is_seen(
    redis_target: RedisTarget, change: str
) -> None:
    here = make_stock(redis_target, f"memory-{change}")
    there = make_stock(redis_target, f"memory-{change}", redis_target.queue_backend())
    sell_out(here)
    key = here.keys()[0]
    first = there.reservation(next(iter(there.reservations())).id)
    assert first is not None
    if change == "restore":
        assert there.restore(first)
    elif change == "add":
        there.add(1)
    elif change == "set":
        there.set(5)
    else:
        assert there.clear()
    wait_for(lambda: not memory.known(here.backend, key), DEADLINE, "the change to arrive")
    take = here.take(buyer="late-1" if change != "restore" else "again")
    expected = TakeResult.UNKNOWN if change == "clear" else TakeResult.OK
    assert take.result is expected


def test_a_change_that_arrives_while_a_take_is_in_flight_is_not_lost(
    redis_target: RedisTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The refusal was computed before the restore, its reply read after the restore's message.

    Driven by hand in that order: the ticket is read, another process restores, the message
    arrives, then the refusal is remembered. It is remembered untracked (trusted for
    ``UNTRACKED_AGE``, 0 here), so the next take asks Redis and takes the unit.
    """
    monkeypatch.setattr(sold_out, "UNTRACKED_AGE", 0.0)
    here = make_stock(redis_target, "memory-race")
    there = make_stock(redis_target, "memory-race", redis_target.queue_backend())
    sell_out(here)
    key = here.keys()[0]
    listener = memory.listeners[id(here.backend)]
    ticket = memory.ticket(here.backend)  # the take is sent...
    before = listener.epoch
    assert there.restore(next(iter(there.reservations())))  # ...a unit comes back...
    wait_for(lambda: listener.epoch > before, DEADLINE, "the restore's message")
    memory.remember(here.backend, key, 0, ticket)  # ...and the refusal's reply is read
    assert memory.entries[(id(here.backend), key)].listener is None
    assert here.take(buyer="again").ok


def test_a_lost_listener_connection_leaves_nothing_trusted(
    redis_target: RedisTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    if redis_target.kind == "fakeredis":
        pytest.skip("fakeredis cannot kill a client connection")
    monkeypatch.setattr(sold_out, "UNTRACKED_AGE", 0.0)
    stock = make_stock(redis_target, "memory-cut")
    sell_out(stock)
    listener = memory.listeners[id(stock.backend)]
    for node in _nodes(redis_target):
        node.client_kill_filter(_type="pubsub")
    assert listener.ended.wait(DEADLINE)
    entry = memory.entries[(id(stock.backend), stock.keys()[0])]
    assert entry.listener is None  # untrusted: the next take asks Redis
    node = node_of(redis_target, stock.keys()[0])
    node.config_resetstat()
    assert stock.take(buyer="a").result is TakeResult.SOLD_OUT
    assert server_commands(node).get("cmdstat_get") == 1  # a probe, not a memory answer
    replacement = memory.listeners[id(stock.backend)]  # the refusal started a new listener
    assert replacement is not listener and replacement.subscribed.wait(DEADLINE)


def _nodes(target: RedisTarget) -> list[Any]:
    raw: Any = target.raw
    if target.kind != "cluster":
        return [raw]
    return [raw.get_redis_connection(node) for node in raw.get_primaries()]
