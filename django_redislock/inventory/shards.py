"""A stock split over buckets: ``Stock.set(units, shards=N)`` (docs/seckill.md, "A sale over
many shards").

Bucket 0 is the stock's own keys, exactly those of a stock of one bucket; bucket ``i > 0``
is a stock of the same item in another hash slot, with its own units, window, buyers set,
reservation records and order queue:

* with an order queue ``Q``, bucket ``i`` lives in the slot of the queue ``Q.s<i>``
  (:func:`bucket_queue`), and its take queues the order task there, in the same script;
* without one, its keys carry the tag ``{stock.s<i>:<item>}`` beside ``{stock:<item>}``.

The number of buckets is stored in bucket 0's meta hash (field ``shards``; absent for one
bucket) and read once per ``Stock`` object and backend.

A buyer's *home* bucket is ``crc32(buyer) % N``. A take asks the home bucket first; only
when it is sold out does the buyer move on: it is first *claimed* in the home bucket's
buyers set (``stock_claim.lua``; a buyer already there already bought: refused), then the
other buckets are asked in turn, each at most once. So the home bucket's buyers set says
whether a buyer bought, wherever the unit came from: per-buyer dedup holds across the
item. A sweep that takes nothing releases the claim; one that fails with an error keeps it
(the buyer cannot buy until a restore or ``reconcile``: never twice).
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..calls.requests import request_id
from ..exceptions import InvalidArgument, StockNotFound
from .calls import REQUEST_TTL_MS, StockCall, set_call
from .records import Reconciliation, Reservation, StockStats, Take, TakeResult, bucket_of
from .sold_out import Ticket, memory
from .sold_out_counts import counts

if TYPE_CHECKING:
    from .stock import Stock

__all__ = ["MAX_SHARDS", "bucket_of", "bucket_queue", "check_shards", "home_bucket", "split"]

#: Most buckets one stock may be split over.
MAX_SHARDS = 64
#: The field of bucket 0's meta hash that holds the number of buckets (absent: one).
FIELD = "shards"


def check_shards(shards: Any) -> int:
    """A number of buckets: an int from 1 to :data:`MAX_SHARDS`."""
    if isinstance(shards, bool) or not isinstance(shards, int) or not 1 <= shards <= MAX_SHARDS:
        raise InvalidArgument(f"shards must be an int from 1 to {MAX_SHARDS}, got {shards!r}")
    return shards


def bucket_queue(queue: str, index: int) -> str:
    """The order queue of bucket ``index`` of a stock whose order queue is ``queue``."""
    return queue if index == 0 else f"{queue}.s{index}"


def home_bucket(buyer: str, shards: int) -> int:
    """The bucket a buyer asks first: a hash of the (normalised) buyer id, the same everywhere."""
    return zlib.crc32(buyer.encode()) % shards if shards > 1 else 0


def split(units: int, shards: int) -> list[int]:
    """``units`` over ``shards`` buckets, as even as can be (the first ones get the rest)."""
    share, rest = divmod(units, shards)
    return [share + (1 if index < rest else 0) for index in range(shards)]


def claim_call(buyer: str, claim: bool) -> StockCall[bool]:
    """Claim ``buyer`` in its home bucket's buyers set (False: it was there), or release it."""
    args = [buyer, "claim" if claim else "release", REQUEST_TTL_MS]
    return StockCall("stock_claim", args, lambda reply: bool(int(reply)), request=request_id())


# -- the take -----------------------------------------------------------------------------------


def units_keys(stock: Stock, shards: int) -> list[str]:
    return [stock.bucket(index)._built_keys().own[0] for index in range(shards)]


def refused_here(stock: Stock, shards: int, qty: int) -> Take | None:
    """Refused from memory when every bucket is remembered sold out (0 Redis calls)."""
    left = 0
    for key in units_keys(stock, shards):
        units = memory.refuses(stock.backend, key, qty)
        if units is None:
            return None
        left += units
    return Take(TakeResult.SOLD_OUT, left)


def count(stock: Stock, shards: int, buyer: str, local: bool) -> None:
    """A sold-out refusal of a sharded take, counted once, in the buyer's home bucket.

    A refusal after a sweep asked every bucket is one buyer refused, not one per bucket:
    the buckets' counts add up to the item's refusals (docs/admin.md, "Flash sales").
    """
    bucket = stock.bucket(home_bucket(buyer, shards))
    keys = bucket._built_keys()
    counts.count(keys.backend, keys.own, local)


def remember(stock: Stock, shards: int, left: dict[int, int], ticket: Ticket) -> None:
    """Every bucket answered sold out in one sweep: the item is, for this process."""
    keys = units_keys(stock, shards)
    for index, units in left.items():
        memory.remember(stock.backend, keys[index], units, ticket)


def forget(stock: Stock, shards: int) -> None:
    for key in units_keys(stock, shards):
        memory.forget(stock.backend, key)


def sweep(home: int, shards: int) -> Iterator[int]:
    """The buckets a buyer tries after its home bucket, each once."""
    return ((home + step) % shards for step in range(1, shards))


def take(stock: Stock, shards: int, qty: int, buyer: str, data: dict[str, Any]) -> Take:
    """:meth:`Stock.take` of a stock of ``shards > 1`` buckets (module doc)."""
    known = refused_here(stock, shards, qty)
    if known is not None:
        count(stock, shards, buyer, True)
        return known
    ticket = memory.ticket(stock.backend)
    home = home_bucket(buyer, shards)
    first = stock.bucket(home)._bucket_take(qty, buyer, data)
    if first.result is not TakeResult.SOLD_OUT:
        return taken(stock, shards, first)
    if not stock.bucket(home)._run(claim_call(buyer, True)):
        return Take(TakeResult.ALREADY_BOUGHT, first.remaining)
    left = {home: first.remaining}
    for index in sweep(home, shards):
        found = stock.bucket(index)._bucket_take(qty, buyer, data)
        if found.result is TakeResult.SOLD_OUT:
            left[index] = found.remaining
            continue
        if found.result not in (TakeResult.OK, TakeResult.ALREADY_BOUGHT):
            stock.bucket(home)._run(claim_call(buyer, False))
        return taken(stock, shards, found)
    stock.bucket(home)._run(claim_call(buyer, False))
    remember(stock, shards, left, ticket)
    count(stock, shards, buyer, False)
    return Take(TakeResult.SOLD_OUT, sum(left.values()))


async def take_async(stock: Stock, shards: int, qty: int, buyer: str, data: dict[str, Any]) -> Take:
    """The asyncio twin of :func:`take`."""
    known = refused_here(stock, shards, qty)
    if known is not None:
        count(stock, shards, buyer, True)
        return known
    ticket = memory.ticket(stock.backend)
    home = home_bucket(buyer, shards)
    first = await stock.bucket(home)._bucket_take_async(qty, buyer, data)
    if first.result is not TakeResult.SOLD_OUT:
        return taken(stock, shards, first)
    if not await stock.bucket(home)._arun(claim_call(buyer, True)):
        return Take(TakeResult.ALREADY_BOUGHT, first.remaining)
    left = {home: first.remaining}
    for index in sweep(home, shards):
        found = await stock.bucket(index)._bucket_take_async(qty, buyer, data)
        if found.result is TakeResult.SOLD_OUT:
            left[index] = found.remaining
            continue
        if found.result not in (TakeResult.OK, TakeResult.ALREADY_BOUGHT):
            await stock.bucket(home)._arun(claim_call(buyer, False))
        return taken(stock, shards, found)
    await stock.bucket(home)._arun(claim_call(buyer, False))
    remember(stock, shards, left, ticket)
    count(stock, shards, buyer, False)
    return Take(TakeResult.SOLD_OUT, sum(left.values()))


def taken(stock: Stock, shards: int, found: Take) -> Take:
    """A sweep's answer other than sold out: the stock is on sale (or gone) for this process."""
    if found.result is TakeResult.UNKNOWN:
        stock._forget_shards()
    elif found.result is TakeResult.OK:
        forget(stock, shards)
    return found


# -- compensation -------------------------------------------------------------------------------


def restore_plan(stock: Stock, reservation: Reservation | str) -> tuple[Stock, str, str | None]:
    """The bucket of a reservation, its id, and its buyer when the caller gave it."""
    if isinstance(reservation, Reservation):
        return stock.bucket(reservation.bucket), reservation.id, reservation.buyer
    return stock.bucket(bucket_of(reservation)), reservation, None


def restore(stock: Stock, shards: int, reservation: Reservation | str, rebuy: bool) -> bool:
    """:meth:`Stock.restore` of a sharded stock: in the reservation's bucket, then the claim.

    With ``rebuy``, a buyer whose unit came from another bucket than its home is also
    released from its home bucket's buyers set (a second script, after the restore: a
    failure between the two leaves the buyer unable to buy again, never able to buy twice).
    """
    call = stock._restore_call(reservation, rebuy)
    bucket, id, buyer = restore_plan(stock, reservation)
    if rebuy and buyer is None:
        found = bucket.reservation(id)
        buyer = None if found is None else found.buyer
    done = bucket._run(call)
    if done and rebuy and buyer is not None:
        home = home_bucket(buyer, shards)
        if home != bucket._index:
            stock.bucket(home)._run(claim_call(buyer, False))
    return done


async def restore_async(
    stock: Stock, shards: int, reservation: Reservation | str, rebuy: bool
) -> bool:
    """The asyncio twin of :func:`restore`."""
    call = stock._restore_call(reservation, rebuy)
    bucket, id, buyer = restore_plan(stock, reservation)
    if rebuy and buyer is None:
        with bucket.backend.errors():
            record = await bucket.backend.async_client().hget(bucket.keys()[3], id)
        buyer = None if record is None else Reservation.from_record(stock.item, id, record).buyer
    done = await bucket._arun(call)
    if done and rebuy and buyer is not None:
        home = home_bucket(buyer, shards)
        if home != bucket._index:
            await stock.bucket(home)._arun(claim_call(buyer, False))
    return done


# -- setting up ---------------------------------------------------------------------------------


def stored(stock: Stock) -> tuple[bool, int]:
    """Whether the stock exists, and its number of buckets (one read each, for ``set()``)."""
    keys = stock._built_keys().own
    with stock.backend.errors():
        count = stock.backend.client.hget(keys[1], FIELD)
        exists = count is not None or stock.backend.client.exists(keys[0]) > 0
    return exists, int(count or 1)


def chosen(stock: Stock, shards: int | None) -> int:
    """The number of buckets a ``set()`` uses: the stored one, or ``shards`` for a new stock."""
    exists, current = stored(stock)
    wanted = current if shards is None else check_shards(shards)
    if exists and wanted != current:
        raise InvalidArgument(
            f"stock {stock.item!r} is split over {current} bucket(s); clear() it (or sell under "
            f"a new item name) to split it over {wanted}: buyers are routed by the number"
        )
    return wanted


def set_units(stock: Stock, shards: int, units: int, opens: Any, closes: Any) -> int:
    """Set a stock of ``shards > 1`` buckets: the count first, bucket 0 last (module doc).

    Every bucket's order queue is listed for ``drain_queue`` at once (a take lists it too,
    but a worker started before the first take, naming the bucket queues, would be refused).
    """
    parts = split(units, shards)
    calls = [set_call("set", part, opens, closes) for part in parts]
    with stock.backend.errors():
        stock.backend.client.hset(stock._built_keys().own[1], FIELD, shards)
    stock._known_shards(shards)
    for index in range(shards):
        stock.bucket(index)._register_queue()
    return sum(stock.bucket(index)._run(calls[index]) for index in reversed(range(shards)))


def add_units(stock: Stock, shards: int, units: int) -> int:
    """Add ``units`` to a stock of ``shards > 1`` buckets, split as :func:`split` does."""
    parts = split(units, shards)
    calls = {index: stock._add_call(part) for index, part in enumerate(parts) if part}
    left = 0
    for index in range(shards):
        bucket = stock.bucket(index)
        found = bucket._run(calls[index]) if index in calls else bucket.remaining()
        if found < 0:
            raise StockNotFound(f"stock {stock.item!r} was never set; call set() first")
        left += found
    return left


def clear(stock: Stock, shards: int) -> bool:
    """Clear every bucket (bucket 0 first: a take that finds it gone reads the count again)."""
    cleared = [stock.bucket(index)._run(stock._clear_call()) for index in range(shards)]
    stock._forget_shards()
    return any(cleared)


# -- reads --------------------------------------------------------------------------------------


def total_stats(item: str, parts: list[StockStats]) -> StockStats:
    """One stock's stats from its buckets' (the window and time are bucket 0's)."""
    first = parts[0]
    return replace(
        first,
        item=item,
        exists=all(part.exists for part in parts),
        remaining=sum(part.remaining for part in parts),
        taken=sum(part.taken for part in parts),
        restored=sum(part.restored for part in parts),
        buyers=sum(part.buyers for part in parts),
        reservations=sum(part.reservations for part in parts),
        refused={
            reason: sum(part.refused.get(reason, 0) for part in parts) for reason in first.refused
        },
    )


def total_reconciliation(item: str, parts: list[Reconciliation]) -> Reconciliation:
    """One stock's reconciliation from its buckets' (each bucket checked on its own)."""
    return Reconciliation(
        item,
        all(part.exists for part in parts),
        sum(part.remaining for part in parts),
        sum(part.taken for part in parts),
        sum(part.restored for part in parts),
        sum(part.reserved for part in parts),
        sum(part.reservations for part in parts),
        sum(part.buyers for part in parts),
        sum(part.missing_buyers for part in parts),
        sum(part.bad_records for part in parts),
        any(part.fixed for part in parts),
    )
