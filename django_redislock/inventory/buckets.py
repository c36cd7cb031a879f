"""The buckets of a :class:`~.stock.Stock` split over many (a mixin of ``Stock``).

Each bucket is a ``Stock`` of the same item whose keys sit in another hash slot
(:mod:`.shards` says which, and how a take moves between them); this module holds how a
stock finds its buckets and their number, and the take of one bucket.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import shards as sharding
from .calls import StockCall, StockKeys
from .records import Take

if TYPE_CHECKING:
    from ..backends.redis import RedisQueueBackend
    from ..queue.registry import TaskFunction
    from ..validation import Rate
    from .stock import Stock


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
    _shards: tuple[Any, int] | None

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

    def _shard_count(self) -> int:
        """The number of buckets, read once per object and backend (bucket 0's meta hash)."""
        if self._index != 0:
            return 1
        backend = self.backend
        if self._shards is None or self._shards[0] is not backend:
            with backend.errors():
                found = backend.client.hget(self._built_keys().own[1], sharding.FIELD)
            self._shards = (backend, int(found or 1))
        return self._shards[1]

    async def _shard_count_async(self) -> int:
        backend = self.backend
        if self._index == 0 and (self._shards is None or self._shards[0] is not backend):
            with backend.errors():
                client = backend.async_client()
                found = await client.hget(self._built_keys().own[1], sharding.FIELD)
            self._shards = (backend, int(found or 1))
        return self._shard_count()

    def _known_shards(self, count: int) -> None:
        self._shards = (self.backend, count)

    def _forget_shards(self) -> None:
        """The stock was cleared or never set: read the number of buckets again next time."""
        self._shards = None

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
