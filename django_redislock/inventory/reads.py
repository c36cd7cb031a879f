"""The reads of a :class:`~.stock.Stock`: units left, stats, reservations (no writes).

A mixin of ``Stock`` (kept apart so that the take, its compensation and the set-up stay in
one short module); every read is one command or one read-only script.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, TypeVar

from ..exceptions import StockNotFound
from .calls import StockCall, StockKeys, stats_call
from .records import Reservation, StockStats

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
        """Units left; raises StockNotFound if the stock was never set."""
        return self._units(self._read_units())

    async def remaining_async(self) -> int:
        """The asyncio twin of :meth:`remaining`."""
        return self._units(await self._read_units_async())

    def _read_units(self) -> Any:
        """The units key's value (None: no such stock), one ``GET``."""
        with self.backend.errors():
            return self.backend.client.get(self._built_keys().own[0])

    async def _read_units_async(self) -> Any:
        with self.backend.errors():
            return await self.backend.async_client().get(self._built_keys().own[0])

    def _units(self, value: Any) -> int:
        if value is None:
            raise StockNotFound(f"stock {self.item!r} was never set; call set() first")
        return int(value)

    def stats(self) -> StockStats:
        """Units left, taken and restored, buyers, live reservations and the window."""
        return self._run(stats_call(self.item))

    async def stats_async(self) -> StockStats:
        """The asyncio twin of :meth:`stats`."""
        return await self._arun(stats_call(self.item))

    def reservation(self, id: str) -> Reservation | None:
        """The live reservation ``id``, or None (never taken, or restored)."""
        with self.backend.errors():
            record = self.backend.client.hget(self.keys()[3], id)
        return None if record is None else Reservation.from_record(self.item, id, record)

    def reservations(self, batch: int = 500) -> Iterator[Reservation]:
        """Every live reservation (HSCAN; for reconciliation and the admin, not hot paths)."""
        with self.backend.errors():
            for id, record in self.backend.client.hscan_iter(self.keys()[3], count=batch):
                yield Reservation.from_record(self.item, id, record)
