"""Setting up a :class:`~.stock.Stock`'s sale: set, restock, reconcile and clear.

A mixin of ``Stock`` (kept apart so that :mod:`.stock` holds the take and its
compensation): each call is one script per bucket, run before or after a sale or by an
operator, never on a buyer's path.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar, cast

from ..exceptions import StockNotFound
from ..validation import check_units, window_micros
from . import shards as sharding
from .buckets import Buckets
from .calls import StockCall, clear_call, reconcile_call, set_call
from .records import Reconciliation

if TYPE_CHECKING:
    from .stock import Stock

R = TypeVar("R")


class StockSetup(Buckets):
    """The set-up calls of one stock."""

    def _run(self, call: StockCall[R]) -> R:
        raise NotImplementedError

    def _stock(self) -> Stock:
        """This object as the ``Stock`` it always is (the shard helpers take one)."""
        return cast("Stock", self)

    def set(
        self, units: int, *, opens: Any = ..., closes: Any = ..., shards: int | None = None
    ) -> int:
        """Make ``units`` the units left, and set the sale window (datetimes; None: open-ended).

        Omitted window bounds keep their stored values. Buyers and reservations
        are kept: use a new item name for a new sale, or :meth:`clear` first.
        ``shards`` splits a new stock's units over that many buckets, each in its own
        hash slot with its own order queue (docs/seckill.md, "A sale over many
        shards"); omitted, a stock keeps its number (1 for a new one). Another
        number than an existing stock's raises InvalidArgument: :meth:`clear` first.
        """
        call = self._set_call(units, opens, closes)
        count = sharding.chosen(self._stock(), shards)
        if count == 1:
            left = self._run(call)
            self._known_shards(1)
            return left
        return sharding.set_units(self._stock(), count, call.args[1], call.args[2], call.args[3])

    def _set_call(self, units: int, opens: Any = ..., closes: Any = ...) -> StockCall[int]:
        return set_call(
            "set",
            check_units(units, "units", allow_zero=True),
            window_micros(opens, "opens"),
            window_micros(closes, "closes"),
        )

    def _add_call(self, units: int) -> StockCall[int]:
        return set_call("add", check_units(units, "units", allow_zero=False), "", "")

    def add(self, units: int) -> int:
        """Add ``units`` (restock) atomically; returns the units left. Raises StockNotFound.

        A resend of the call by a retrying client answers the same and adds
        nothing more; a second call of your own adds again.
        """
        call = self._add_call(units)
        shards = self._shard_count()
        if shards > 1:
            return sharding.add_units(self._stock(), shards, units)
        left = self._run(call)
        if left < 0:
            raise StockNotFound(f"stock {self.item!r} was never set; call set() first")
        return left

    def reconcile(self, *, fix: bool = False) -> Reconciliation:
        """Check the stock's counters and buyers set against its reservation records.

        With ``fix``, set the ``taken`` counter from the records and add buyers missing from
        the buyers set (see ``stock_reconcile.lua``; ``manage.py reconcile_stock``).
        """
        shards = self._shard_count()
        if shards > 1:
            parts = [self.bucket(i)._run(reconcile_call(self.item, fix)) for i in range(shards)]
            return sharding.total_reconciliation(self.item, parts)
        return self._run(reconcile_call(self.item, fix))

    def _clear_call(self) -> StockCall[bool]:
        return clear_call()

    def clear(self) -> bool:
        """Delete the stock, its buyers and reservations (not queued tasks); True if it existed.

        A sharded stock clears every bucket it is known to have (the number is read once per
        object, as for a take).
        """
        shards = self._shard_count()
        if shards > 1:
            return sharding.clear(self._stock(), shards)
        cleared = self._run(clear_call())
        self._forget_shards()
        return cleared
