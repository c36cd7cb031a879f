"""Stock calls sent twice: a take, restore, set or add that Redis ran and that is resent.

redis-py resends a command after a connection error or a timeout (its default
``Retry``, a ``Retry`` in ``CLIENT_KWARGS``, or the cluster client's retries), so
a call whose reply was lost runs again. Each state-changing stock script carries
a request key: the resend must answer exactly what the first run answered and
change nothing.

* Through the fault proxy (single server and cluster): the proxy drops the reply
  of the take (restore, add) after Redis ran it and cuts the connection; the
  client resends; the stock must hold one reservation, one unit taken, one order
  task, and the caller gets the first run's answer.
* Directly on the script (fakeredis, single, cluster): the same call object run
  twice, with other calls in between, is the resend at its latest; refusals leave
  no record; a record is small and expires.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from redis.asyncio.retry import Retry as AsyncRetry
from redis.backoff import NoBackoff

from django_redislock.inventory import Stock, TakeResult
from django_redislock.inventory.calls import REQUEST_TTL_MS, clear_call

from . import inventory_tasks
from .conftest import RedisTarget
from .faults import Args, Fault, Matcher, command_name
from .proxied import ProxiedTarget, cuts_only, resend_options

pytestmark = pytest.mark.timeout(60)

KINDS = ("single", "cluster")
SCRIPT_COMMANDS = (b"EVALSHA", b"EVAL")
#: A request record is "<units left>:<µs>" or "<left>:<qty>:<dropped>" or "<units>".
MAX_RECORD_BYTES = 40


def stock_script(stock: Stock, commands: tuple[bytes, ...] = SCRIPT_COMMANDS) -> Matcher:
    """Matches the script calls of ``stock`` (its keys name the item); ``()``: any command."""
    needle = f":{stock.item}:".encode()

    def match(args: Args) -> bool:
        if commands and command_name(args) not in commands:
            return False
        return any(needle in arg for arg in args)

    return match


def proxied_stock(target: ProxiedTarget, asynchronous: bool = False) -> Stock:
    """A stock with an order task behind the proxy, on a client that resends once.

    ``asynchronous``: for the ``*_async`` calls only (on a single server the
    asyncio client takes an asyncio ``Retry``, which the blocking one cannot use).
    """
    options = resend_options(target.kind)
    if asynchronous and target.kind == "single":
        options = {"CLIENT_KWARGS": {"retry": AsyncRetry(NoBackoff(), 1)}}
    backend = target.queue_backend(**options, **cuts_only(target.kind))  # the faults cut
    name = f"sale-{target.prefix}"
    return Stock(name, order_task=inventory_tasks.record_order, queue=name, using=backend)


def request_keys(stock: Stock, raw: Any) -> list[bytes]:
    """The stock's request records in Redis."""
    pattern = stock.keys()[0].removesuffix("units") + "req:*"
    return sorted(raw.scan_iter(match=pattern, count=1000))


def lose_the_next_reply(
    target: ProxiedTarget, stock: Stock, match: Matcher = None
) -> tuple[list[Fault], int]:
    """Drop the reply of the stock's next script call (it ran) and cut the connection."""
    match = match or stock_script(stock)
    return target.drop_reply(match, then="cut"), target.count(match)


def check_fired_and_resent(
    target: ProxiedTarget, stock: Stock, faults: list[Fault], seen: int, match: Matcher = None
) -> None:
    target.clear()
    assert sum(len(f.hits) for f in faults) == 1, "the fault never met the call"
    sent = target.count(match or stock_script(stock)) - seen
    assert sent == 2, "the call was not sent exactly twice"


def check_one_take(target: ProxiedTarget, stock: Stock, take: Any, first: Any) -> None:
    """One reservation, one unit and one order for buyer-1, answered as the first run did."""
    assert take.result is TakeResult.OK and take.reservation is not None
    assert take.remaining == 3  # 5 units, the warm-up take, this take: once
    stats = stock.stats()
    assert (stats.remaining, stats.taken, stats.buyers, stats.reservations) == (3, 2, 2, 2)
    mine = [r for r in stock.reservations() if r.buyer == "buyer-1"]
    assert [r.id for r in mine] == [take.reservation.id]
    # the time the first run recorded in the reservation is the time the answer carries
    assert mine[0].taken_at == take.reservation.taken_at
    assert stock.queue is not None
    assert sorted(t.id for t in stock.queue.tasks("ready", count=10)) == sorted(
        [first.reservation.id, take.reservation.id]
    )
    records = request_keys(stock, target.raw())
    assert len(records) == 3  # the set's, the warm-up take's and this take's


@pytest.mark.parametrize("kind", KINDS)
def test_a_resent_take_after_a_lost_reply_takes_once(
    kind: str, request: pytest.FixtureRequest
) -> None:
    target: ProxiedTarget = request.getfixturevalue(f"proxied_{kind}")
    stock = proxied_stock(target)
    stock.set(5)
    first = stock.take(buyer="early")  # loads the script: no NOSCRIPT round in the count
    faults, seen = lose_the_next_reply(target, stock)
    take = stock.take(buyer="buyer-1")
    check_fired_and_resent(target, stock, faults, seen)
    check_one_take(target, stock, take, first)


@pytest.mark.parametrize("kind", KINDS)
def test_a_take_is_one_command_on_the_wire(kind: str, request: pytest.FixtureRequest) -> None:
    target: ProxiedTarget = request.getfixturevalue(f"proxied_{kind}")
    stock = proxied_stock(target)
    stock.set(5)
    assert stock.take(buyer="early").ok  # loads the script, lists the order queue
    seen = target.count()
    takes = [stock.take(buyer=f"b{i}") for i in range(3)] + [stock.take(buyer="b0")]
    assert [t.result for t in takes] == [TakeResult.OK] * 3 + [TakeResult.ALREADY_BOUGHT]
    assert target.count() - seen == 4  # the request id rides in the same EVALSHA


@pytest.mark.parametrize("kind", KINDS)
def test_a_resent_async_take_after_a_lost_reply_takes_once(
    kind: str, request: pytest.FixtureRequest
) -> None:
    target: ProxiedTarget = request.getfixturevalue(f"proxied_{kind}")
    stock = proxied_stock(target)  # the blocking calls (a sync Retry), same keys
    stock.set(5)
    twin = proxied_stock(target, asynchronous=True)

    async def scenario() -> tuple[Any, Any, list[Fault], int]:
        first = await twin.take_async(buyer="early")
        faults, seen = lose_the_next_reply(target, twin)
        return first, await twin.take_async(buyer="buyer-1"), faults, seen

    first, take, faults, seen = asyncio.run(scenario())
    check_fired_and_resent(target, stock, faults, seen)
    check_one_take(target, stock, take, first)


@pytest.mark.parametrize("kind", KINDS)
def test_an_async_take_cancelled_at_its_await_took_once_or_not_at_all(
    kind: str, request: pytest.FixtureRequest
) -> None:
    target: ProxiedTarget = request.getfixturevalue(f"proxied_{kind}")
    stock = proxied_stock(target)
    stock.set(5)
    twin = proxied_stock(target, asynchronous=True)

    async def scenario() -> tuple[list[Fault], Any]:
        await twin.take_async(buyer="early")
        # the take reaches Redis, then nothing comes back until the caller gives up
        faults = target.stall_on(5.0, stock_script(twin))
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(twin.take_async(buyer="buyer-1"), 0.2)
        target.clear()  # the held reply goes to a connection the client has dropped
        return faults, await twin.take_async(buyer="buyer-1")

    faults, again = asyncio.run(scenario())
    assert any(f.fired.is_set() for f in faults), "the stall never met the take"
    # the cancelled take ran: the buyer holds it; the next call did not read its stale reply
    assert again.result is TakeResult.ALREADY_BOUGHT and again.remaining == 3
    stats = stock.stats()
    assert (stats.remaining, stats.taken, stats.buyers, stats.reservations) == (3, 2, 2, 2)
    assert stock.queue is not None and stock.queue.stats()["ready"] == 2


@pytest.mark.parametrize("kind", KINDS)
def test_a_resent_restore_after_a_lost_reply_answers_true_and_restores_once(
    kind: str, request: pytest.FixtureRequest
) -> None:
    target: ProxiedTarget = request.getfixturevalue(f"proxied_{kind}")
    stock = proxied_stock(target)
    stock.set(2)
    take = stock.take(buyer="a")
    assert take.reservation is not None
    stock.restore("never-taken")  # loads the script
    faults, seen = lose_the_next_reply(target, stock)
    assert stock.restore(take.reservation) is True  # the first run's answer, not "already"
    check_fired_and_resent(target, stock, faults, seen)
    stats = stock.stats()
    assert (stats.remaining, stats.taken, stats.restored, stats.reservations) == (2, 1, 1, 0)
    assert stock.queue is not None and stock.queue.stats()["ready"] == 0


@pytest.mark.parametrize("kind", KINDS)
def test_a_resent_add_after_a_lost_reply_adds_once(
    kind: str, request: pytest.FixtureRequest
) -> None:
    target: ProxiedTarget = request.getfixturevalue(f"proxied_{kind}")
    stock = proxied_stock(target)
    stock.set(5)  # loads the script (set and add are one script)
    faults, seen = lose_the_next_reply(target, stock)
    assert stock.add(3) == 8
    check_fired_and_resent(target, stock, faults, seen)
    assert stock.remaining() == 8


@pytest.mark.parametrize("kind", KINDS)
def test_a_resent_clear_after_a_lost_reply_answers_true(
    kind: str, request: pytest.FixtureRequest
) -> None:
    target: ProxiedTarget = request.getfixturevalue(f"proxied_{kind}")
    stock = proxied_stock(target)
    stock.set(5)
    assert stock.clear() is True  # loads the script
    stock.set(5)
    anything = stock_script(stock, ())  # whatever command clears it
    faults, seen = lose_the_next_reply(target, stock, anything)
    assert stock.clear() is True  # the first run's answer, not "there was nothing"
    check_fired_and_resent(target, stock, faults, seen, anything)
    assert not stock.stats().exists


# -- the same request run twice on the script itself ------------------------------------------


def make_stock(target: RedisTarget, item: str = "phone-r") -> Stock:
    return Stock(item, order_task=inventory_tasks.record_order, using=target.queue_backend())


def test_a_late_resend_of_a_take_answers_the_first_answer_and_changes_nothing(
    redis_target: RedisTarget,
) -> None:
    stock = make_stock(redis_target)
    stock.set(3)
    call = stock._take_call(1, "a", {"sale": 7})
    first = stock._run(call)
    assert first.result is TakeResult.OK and first.reservation is not None
    other = stock.take(buyer="b")  # the units change before the resend arrives
    assert other.ok and other.remaining == 1
    assert stock._run(call) == first  # same units left, same reservation, same time
    stats = stock.stats()
    assert (stats.remaining, stats.taken, stats.buyers, stats.reservations) == (1, 2, 2, 2)
    assert stock.queue is not None and stock.queue.stats()["ready"] == 2
    # even after its reservation was restored, the resend takes nothing again
    assert stock.restore(first.reservation)
    assert stock._run(call) == first
    stats = stock.stats()
    assert (stats.remaining, stats.taken, stats.buyers, stats.reservations) == (2, 2, 1, 1)
    assert stock.queue.stats()["ready"] == 1


def test_a_late_resend_of_restore_set_and_add_changes_nothing(redis_target: RedisTarget) -> None:
    stock = make_stock(redis_target)
    setting = stock._set_call(4)
    assert stock._run(setting) == 4
    take = stock.take(buyer="a")
    assert take.reservation is not None
    # a resent set answers 4 again and does not undo the take made since
    assert stock._run(setting) == 4 and stock.remaining() == 3
    adding = stock._add_call(2)
    assert stock._run(adding) == 5
    assert stock._run(adding) == 5 and stock.remaining() == 5
    restoring = stock._restore_call(take.reservation, rebuy=True)
    assert stock._run(restoring) is True
    again = stock.take(buyer="a")  # the buyer buys again
    assert again.ok
    assert stock._run(restoring) is True  # the first answer; the new reservation stands
    stats = stock.stats()
    assert (stats.remaining, stats.taken, stats.restored, stats.reservations) == (5, 2, 1, 1)
    # a second restore is a new request: the reservation is gone, so False
    assert stock.restore(take.reservation) is False


def test_request_records_are_small_expire_and_refusals_leave_none(
    redis_target: RedisTarget,
) -> None:
    stock = make_stock(redis_target)
    raw = redis_target.raw
    stock.set(1)
    assert stock.take(buyer="a").ok
    for buyer in ("a", "b"):  # already bought, sold out: nothing recorded
        assert not stock.take(buyer=buyer).ok
    stock.restore("never-taken")  # not a live reservation: nothing recorded
    records = request_keys(stock, raw)
    assert len(records) == 2  # the set's and the take's
    for key in records:
        assert 0 < raw.pttl(key) <= REQUEST_TTL_MS
        assert len(raw.get(key)) <= MAX_RECORD_BYTES
        assert redis_target.kind != "cluster" or raw.keyslot(key) == raw.keyslot(stock.keys()[0])


def test_a_late_resend_of_clear_answers_true_and_spares_a_new_stock(
    redis_target: RedisTarget,
) -> None:
    stock = make_stock(redis_target)
    stock.set(2)
    clearing = clear_call()
    assert stock._run(clearing) is True
    stock.set(7)  # a new sale under the same item name, before the resend arrives
    assert stock._run(clearing) is True  # the first answer; the new stock stands
    assert stock.remaining() == 7
    assert stock.clear() is True and stock.clear() is False  # two calls: the second finds none
