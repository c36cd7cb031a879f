"""The reads of a :class:`~.stock.Stock`: units left, stats, reservations (no writes).

A mixin of ``Stock`` (kept apart so that the take, its compensation and the set-up stay in
one short module); every read is one command or one read-only script.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, TypeVar

from ..exceptions import StockNotFound
from .calls import StockCall, StockKeys, stats_call
from .records import Reservation, StockStats, bucket_of
from .shards import total_stats

if TYPE_CHECKING:
    from ..backends.redis import RedisQueueBackend

R = TypeVar("R")


class StockReads:
    """Units left, stats and reservations of one stock."""

    item: str

    @property
    def backend(self) -> RedisQueueBackend:
        raise NotImplementedError

    def _built_keys(self) -> StockKeys:
        raise NotImplementedError

    def keys(self, with_queue: bool = False) -> list[str]:
        raise NotImplementedError

    def _run(self, call: StockCall[R]) -> R:
        raise NotImplementedError

    async def _arun(self, call: StockCall[R]) -> R:
        raise NotImplementedError

    def remaining(self) -> int:
        """Units left (over every bucket); raises StockNotFound if the stock was never set."""
        shards = self._shard_count()
        if shards > 1:
            return sum(self.bucket(i)._units(self.bucket(i)._read_units()) for i in range(shards))
        return self._units(self._read_units())

    async def remaining_async(self) -> int:
        """The asyncio twin of :meth:`remaining`."""
        shards = await self._shard_count_async()
        buckets = [self.bucket(i) for i in range(shards)]
        return sum([bucket._units(await bucket._read_units_async()) for bucket in buckets])

    def _read_units(self) -> Any:
        """The units key's value (None: no such stock), one ``GET``."""
        with self.backend.errors():
            return self.backend.client.get(self._built_keys().own[0])

    async def _read_units_async(self) -> Any:
        with self.backend.errors():
            return await self.backend.async_client().get(self._built_keys().own[0])

    def _shard_count(self) -> int:
        raise NotImplementedError

    async def _shard_count_async(self) -> int:
        raise NotImplementedError

    def bucket(self, index: int) -> StockReads:
        raise NotImplementedError

    def _units(self, value: Any) -> int:
        if value is None:
            raise StockNotFound(f"stock {self.item!r} was never set; call set() first")
        return int(value)

    def stats(self) -> StockStats:
        """Units left, taken and restored, buyers, live reservations and the window.

        A sharded stock's are the sums of its buckets' (:meth:`bucket_stats`); a buyer
        served by another bucket than its home is counted in both buyers sets.
        """
        parts = self.bucket_stats()
        return parts[0] if len(parts) == 1 else total_stats(self.item, parts)

    def bucket_stats(self) -> list[StockStats]:
        """The stats of each bucket, bucket 0 first (one script each)."""
        return [self.bucket(i)._run(stats_call(self.item)) for i in range(self._shard_count())]

    async def stats_async(self) -> StockStats:
        """The asyncio twin of :meth:`stats`."""
        buckets = [self.bucket(i) for i in range(await self._shard_count_async())]
        parts = [await bucket._arun(stats_call(self.item)) for bucket in buckets]
        return parts[0] if len(parts) == 1 else total_stats(self.item, parts)

    def reservation(self, id: str) -> Reservation | None:
        """The live reservation ``id``, or None (never taken, or restored), in its bucket."""
        bucket = self.bucket(bucket_of(id))
        with self.backend.errors():
            record = self.backend.client.hget(bucket.keys()[3], id)
        return None if record is None else Reservation.from_record(self.item, id, record)

    def reservations(self, batch: int = 500) -> Iterator[Reservation]:
        """Every live reservation (HSCAN; for reconciliation and the admin, not hot paths)."""
        for index in range(self._shard_count()):
            key = self.bucket(index).keys()[3]
            with self.backend.errors():
                for id, record in self.backend.client.hscan_iter(key, count=batch):
                    yield Reservation.from_record(self.item, id, record)
