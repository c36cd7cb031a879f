"""A sold-out take is cheap on both sides: one read at the server, no payload at the client.

After sell-out every buyer is refused, so what a refusal costs is what the crowd costs:
the take script answers "sold out" from one ``MGET`` of the units and the request's record
(a resent take that took finds its record in that read), and a client that saw the
stock sold out sends a probe instead of a take (no reservation id, no order payload).
A stock back on sale is taken at once (docs/seckill.md, "Sold out").
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from django_redislock.inventory import Stock, TakeResult, sold_out
from django_redislock.inventory import stock as stock_module

from . import inventory_tasks
from .conftest import RedisTarget
from .servers import RedisProcess


def make_stock(target: RedisTarget, item: str) -> Stock:
    return Stock(item, order_task=inventory_tasks.record_order, using=target.queue_backend())


def node_of(target: RedisTarget, key: str) -> Any:
    """The client of the server that holds ``key`` (the primary of its slot on a Cluster)."""
    raw: Any = target.raw
    if target.kind != "cluster":
        return raw
    return raw.get_redis_connection(raw.nodes_manager.get_node_from_slot(raw.keyslot(key)))


def server_commands(node: Any) -> dict[str, int]:
    """Commands ``node`` ran since the last reset (Lua's included), by name.

    Without the sold-out listener's set-up (its connection's ``CLIENT SETINFO`` and one
    ``SUBSCRIBE``), which a first sold-out answer starts once per process.
    """
    return {
        name: int(value["calls"])
        for name, value in node.info("commandstats").items()
        if name not in ("cmdstat_subscribe", "cmdstat_client|setinfo")
    }


@pytest.fixture(params=["single", "cluster"])
def counted(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[RedisTarget]:
    """A real server whose command statistics count this test's calls only.

    The single server is private to the test: the session's is the settings' server too,
    where a thread left by an earlier test of the same process (a lease keeper, a
    heartbeat) can run a command inside the counted window on a loaded machine (it did:
    `HGET`, `PEXPIRE`, `HSET`, `HDEL`). The cluster serves only the tests that ask for it.
    """
    if request.param == "cluster":
        yield request.getfixturevalue("cluster_target")
        return
    server = RedisProcess(tmp_path / "counted").start()
    try:
        yield RedisTarget("single", server.url, {}, server.client())
    finally:
        server.stop()


def test_a_sold_out_take_runs_one_read_at_the_server(counted: RedisTarget) -> None:
    stock = make_stock(counted, "sold-out-server")
    stock.set(1)
    assert stock.take(buyer="first").ok
    sold_out.memory.clear()  # as in another process: it never saw the stock sold out
    node = node_of(counted, stock.keys()[0])
    node.config_resetstat()
    refused = stock.take(buyer="late")
    assert (refused.result, refused.remaining) == (TakeResult.SOLD_OUT, 0)
    ran = {
        name: calls
        for name, calls in server_commands(node).items()
        if name not in ("cmdstat_info", "cmdstat_config|resetstat", "cmdstat_config")
    }
    assert ran == {"cmdstat_evalsha": 1, "cmdstat_mget": 1}


def test_a_client_that_saw_sold_out_builds_no_payload(
    redis_target: RedisTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    stock = make_stock(redis_target, "sold-out-client")
    stock.set(1)
    assert stock.take(buyer="first").ok
    assert stock.take(buyer="second").result is TakeResult.SOLD_OUT  # now remembered

    def no_uuid() -> uuid.UUID:
        raise AssertionError("a sold-out take drew a reservation id")

    def no_payload(*args: Any, **kwargs: Any) -> bytes:
        raise AssertionError("a sold-out take built an order payload")

    with monkeypatch.context() as patched:
        # the stock module's own uuid (fakeredis draws ids from the real one for its clients)
        patched.setattr(stock_module, "uuid", SimpleNamespace(uuid4=no_uuid))
        patched.setattr(Stock, "_order_payload", no_payload)
        # built per request, as in a view (on the alias's one backend)
        again = Stock("sold-out-client", order_task=inventory_tasks.record_order, using=stock.using)
        for buyer in ("third", "fourth"):
            refused = again.take(buyer=buyer)
            assert (refused.result, refused.remaining) == (TakeResult.SOLD_OUT, 0)
        refused = asyncio.run(again.take_async(buyer="fifth"))
        assert refused.result is TakeResult.SOLD_OUT
        with pytest.raises(Exception, match="qty"):
            again.take(0, buyer="sixth")  # bad input is still refused before Redis
    stats = stock.stats()
    assert (stats.remaining, stats.taken, stats.buyers) == (0, 1, 1)


def test_a_stock_back_on_sale_is_taken_at_once(redis_target: RedisTarget) -> None:
    stock = make_stock(redis_target, "back-on-sale")
    stock.set(1)
    first = stock.take(buyer="first")
    assert first.ok and first.reservation is not None
    assert stock.take(buyer="second").result is TakeResult.SOLD_OUT
    assert stock.restore(first.reservation)  # the unit is back
    take = stock.take(buyer="second")
    assert take.ok and take.remaining == 0
    assert stock.take(buyer="third").result is TakeResult.SOLD_OUT
    stock.add(2)  # restocked
    assert asyncio.run(stock.take_async(buyer="third")).ok
    assert stock.take(buyer="fourth").ok
    assert stock.take(buyer="fifth").result is TakeResult.SOLD_OUT
    stats = stock.stats()
    assert (stats.remaining, stats.buyers, stats.reservations) == (0, 3, 3)
    # the restored reservation's order task left the queue with it
    assert stock.queue is not None and stock.queue.stats()["ready"] == 3


def test_sold_out_is_answered_before_the_buyer_and_window_checks(
    redis_target: RedisTarget,
) -> None:
    stock = make_stock(redis_target, "sold-out-first")
    stock.set(1)
    assert stock.take(buyer="a").ok
    sold_out.memory.clear()
    again = stock.take(buyer="a")  # the buyer holds a reservation, and nothing is left
    assert (again.result, again.remaining) == (TakeResult.SOLD_OUT, 0)
    stock.set(3)
    assert stock.take(buyer="a").result is TakeResult.ALREADY_BOUGHT


def test_a_client_that_saw_sold_out_asks_with_one_get_and_no_script(
    counted: RedisTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once its memory of the sell-out is too old to trust, a take probes with one GET."""
    monkeypatch.setattr(sold_out, "MAX_AGE", 0.0)
    monkeypatch.setattr(sold_out, "UNTRACKED_AGE", 0.0)
    stock = make_stock(counted, "sold-out-probe")
    stock.set(1)
    assert stock.take(buyer="first").ok
    assert stock.take(buyer="second").result is TakeResult.SOLD_OUT  # now remembered
    node = node_of(counted, stock.keys()[0])
    node.config_resetstat()
    for buyer in ("third", "fourth"):
        refused = stock.take(buyer=buyer)
        assert (refused.result, refused.remaining) == (TakeResult.SOLD_OUT, 0)
    refused = asyncio.run(stock.take_async(buyer="fifth"))
    assert (refused.result, refused.remaining) == (TakeResult.SOLD_OUT, 0)
    # the asyncio client's new connection says HELLO and PING first
    setup = ("cmdstat_info", "cmdstat_config|resetstat", "cmdstat_hello", "cmdstat_ping")
    ran = {name: calls for name, calls in server_commands(node).items() if name not in setup}
    assert {name for name in ran if name.startswith("cmdstat_client")} <= {
        "cmdstat_client|setinfo",
        "cmdstat_client|setname",
    }
    ran = {name: calls for name, calls in ran.items() if not name.startswith("cmdstat_client")}
    assert ran == {"cmdstat_get": 3}
    # a probe that finds no stock answers as a take would
    stock.clear()
    assert stock.take(buyer="sixth").result is TakeResult.UNKNOWN


def test_a_take_runs_only_the_commands_its_answer_and_its_order_need(
    counted: RedisTarget,
) -> None:
    stock = make_stock(counted, "take-commands")
    stock.set(5)
    assert stock.take(buyer="first").ok  # the signal list, rate buckets and script exist
    node = node_of(counted, stock.keys()[0])
    node.config_resetstat()
    assert stock.take(buyer="second").ok
    ran = {
        name: calls
        for name, calls in server_commands(node).items()
        if name not in ("cmdstat_info", "cmdstat_config|resetstat", "cmdstat_config")
    }
    # units and resend record, TIME, the window, the buyer (SADD is its own check), the
    # units, the reservation, taken, the resend record; the order: pending, payload, its
    # enqueue time, the signal, the rate buckets (HMGET and two HINCRBY)
    assert ran == {
        "cmdstat_evalsha": 1,
        "cmdstat_mget": 1,
        "cmdstat_time": 1,
        "cmdstat_hmget": 2,
        "cmdstat_sadd": 1,
        "cmdstat_decrby": 1,
        "cmdstat_hset": 3,
        "cmdstat_hincrby": 3,
        "cmdstat_set": 1,
        "cmdstat_zadd": 1,
        "cmdstat_llen": 1,
    }
    again = stock.take(buyer="second")
    assert (again.result, again.remaining) == (TakeResult.ALREADY_BOUGHT, 3)
    stats = stock.stats()
    assert (stats.remaining, stats.taken, stats.buyers, stats.reservations) == (3, 2, 2, 2)
