"""The buckets of a :class:`~.stock.Stock` split over many (a mixin of ``Stock``).

Each bucket is a ``Stock`` of the same item whose keys sit in another hash slot
(:mod:`.shards` says which, and how a take moves between them); this module holds how a
stock finds its buckets and their number, and the take of one bucket.

The number of buckets is kept per process (:data:`counts`), not per object: a shop
builds a ``Stock`` per request, and asking Redis for the number on each one would add a
round trip to every take (and one to each refusal the sold-out memory answers). It only
changes through ``clear()`` and a new ``set()``: this process's own calls forget it, a
stock-changes message forgets it (the listener of :mod:`.sold_out`), and a take that
finds its bucket unknown reads it again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import shards as sharding
from .calls import StockCall, StockKeys
from .records import Take
from .sold_out import memory

if TYPE_CHECKING:
    from ..backends.redis import RedisQueueBackend
    from ..queue.registry import TaskFunction
    from ..validation import Rate
    from .stock import Stock


#: The number of buckets per (backend, bucket 0's meta key), as last read in this process.
counts: dict[tuple[int, str], int] = {}
#: Most stocks whose number is kept (then the cache starts over).
MAX_COUNTS = 10_000


def forget_count(backend: Any, units_key: str) -> None:
    """A stock changed (its units key, as published): read its number of buckets again."""
    meta = units_key.removesuffix(":units") + ":meta"
    counts.pop((id(backend), meta), None)


memory.on_change.append(forget_count)


class Buckets:
    """A stock's buckets: ``bucket(i)``, ``shards()``, ``order_queues()``."""

    item: str
    order_task: TaskFunction[..., Any] | None
    queue_name: str | None
    using: str | RedisQueueBackend
    admission: Rate | None
    buyer_admission: Rate | None
    _index: int
    _buckets: dict[int, Stock]

    @property
    def backend(self) -> RedisQueueBackend:
        raise NotImplementedError

    def _built_keys(self) -> StockKeys:
        raise NotImplementedError

    def _full_take_call(self, qty: int, buyer: str, data: dict[str, Any]) -> StockCall[Take]:
        raise NotImplementedError

    def _run(self, call: StockCall[Any]) -> Any:
        raise NotImplementedError

    async def _arun(self, call: StockCall[Any]) -> Any:
        raise NotImplementedError

    def _register_queue(self) -> None:
        raise NotImplementedError

    def _after_take(self, take: Take) -> Take:
        raise NotImplementedError

    def bucket(self, index: int) -> Stock:
        """The stock of bucket ``index`` of this item (0: this stock's own keys)."""
        if index == 0 or self._index != 0:
            return self  # type: ignore[return-value]  # a Buckets is always a Stock
        found: Stock | None = self._buckets.get(index)
        if found is None:
            queue = (
                None if self.queue_name is None else sharding.bucket_queue(self.queue_name, index)
            )
            make: Any = type(self)
            found = make(self.item, order_task=self.order_task, queue=queue, using=self.using)
            found.admission, found.buyer_admission = self.admission, self.buyer_admission
            found._index = index
            self._buckets[index] = found
        return found

    def shards(self) -> int:
        """The number of buckets the stock is split over (1 unless ``set(shards=N)``)."""
        return self._shard_count()

    def order_queues(self) -> list[str]:
        """The names of the order queues of every bucket (a worker drains all of them)."""
        if self.queue_name is None:
            return []
        return [sharding.bucket_queue(self.queue_name, i) for i in range(self._shard_count())]

    def _count_key(self) -> tuple[int, str]:
        return (id(self.backend), self._built_keys().own[1])

    def _shard_count(self) -> int:
        """The number of buckets, read once per process and backend (bucket 0's meta hash)."""
        if self._index != 0:
            return 1
        key = self._count_key()
        found = counts.get(key)
        if found is None:
            backend = self.backend
            with backend.errors():
                found = int(backend.client.hget(key[1], sharding.FIELD) or 1)
            self._known_shards(found)
        return found

    async def _shard_count_async(self) -> int:
        if self._index != 0:
            return 1
        key = self._count_key()
        found = counts.get(key)
        if found is None:
            backend = self.backend
            with backend.errors():
                found = int(await backend.async_client().hget(key[1], sharding.FIELD) or 1)
            self._known_shards(found)
        return found

    def _known_shards(self, count: int) -> None:
        if len(counts) >= MAX_COUNTS:
            counts.clear()
        counts[self._count_key()] = count

    def _forget_shards(self) -> None:
        """The stock was cleared or never set: read the number of buckets again next time."""
        counts.pop(self._count_key(), None)

    def _bucket_take(self, qty: int, buyer: str, data: dict[str, Any]) -> Take:
        """One take in this bucket, with no memory of sold-out (the sweep keeps that)."""
        call = self._full_take_call(qty, buyer, data)
        self._register_queue()
        return self._after_take(self._run(call))

    async def _bucket_take_async(self, qty: int, buyer: str, data: dict[str, Any]) -> Take:
        call = self._full_take_call(qty, buyer, data)
        if self.queue_name is not None:
            await self.backend.register_queue_async(self.queue_name)
        return self._after_take(await self._arun(call))
