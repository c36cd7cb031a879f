"""What the inventory calls return: :class:`TakeResult`, :class:`Take`, :class:`Reservation`.

Refusals are values, not exceptions: on a flash sale most calls are refused
(sold out, already bought), and a view should answer them as cheaply as it
answers a success.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ..queue.records import from_micros
from ..wire import to_text


class TakeResult(str, enum.Enum):
    """The outcome of :meth:`Stock.take <django_redislock.inventory.Stock.take>`."""

    #: Units were taken; the reservation is recorded and its order task queued.
    OK = "ok"
    #: Fewer units are left than were asked for.
    SOLD_OUT = "sold_out"
    #: This buyer already holds a reservation of this stock.
    ALREADY_BOUGHT = "already_bought"
    #: The sale window has not opened yet.
    NOT_OPEN = "not_open"
    #: The sale window has closed.
    ENDED = "ended"
    #: No such stock: ``set()`` was never called for this item (or it was cleared).
    UNKNOWN = "unknown"
    #: The stock's admission limit (``Stock(admission=..., buyer_admission=...)``) did not
    #: admit the take now; ``Take.retry_after`` says when it would.
    RATE_LIMITED = "rate_limited"


#: The take script's reply codes.
TAKE_CODES = (
    TakeResult.OK,
    TakeResult.SOLD_OUT,
    TakeResult.ALREADY_BOUGHT,
    TakeResult.NOT_OPEN,
    TakeResult.ENDED,
    TakeResult.UNKNOWN,
    TakeResult.RATE_LIMITED,
)


#: What a reservation id of bucket ``i > 0`` ends with, before ``i`` (bucket 0 ids are bare hex).
BUCKET_MARK = "-b"


def bucket_of(reservation_id: str) -> int:
    """The bucket a reservation id was taken from: ``"<hex>-b3"`` -> 3, a bare id -> 0."""
    _, mark, index = reservation_id.rpartition(BUCKET_MARK)
    return int(index) if mark and index.isdigit() else 0


@dataclass(frozen=True)
class Reservation:
    """Units one buyer holds: the record a take wrote, and what the order task receives.

    ``id`` is unique per take and is also the order task's id, so it makes a
    natural order number: creating the order keyed by it is idempotent.
    """

    item: str
    id: str
    buyer: str
    qty: int
    #: Server time of the take in microseconds (None in the order task's copy, which is
    #: built before the script runs).
    taken_at: int | None = None
    data: dict[str, Any] = field(default_factory=dict)

    @property
    def bucket(self) -> int:
        """The bucket of a sharded stock that holds it (0 for a stock of one bucket).

        Read from the id: a take from bucket ``i > 0`` names its reservation
        ``<32 hex digits>-b<i>`` (:func:`bucket_of`).
        """
        return bucket_of(self.id)

    @property
    def when(self) -> datetime | None:
        """``taken_at`` as an aware UTC datetime."""
        return None if self.taken_at is None else from_micros(self.taken_at)

    def as_dict(self) -> dict[str, Any]:
        """The JSON form passed to the order task as its ``reservation`` argument."""
        return {
            "item": self.item,
            "id": self.id,
            "buyer": self.buyer,
            "qty": self.qty,
            "taken_at": self.taken_at,
            "data": dict(self.data),
        }

    @classmethod
    def from_dict(cls, value: dict[str, Any]) -> Reservation:
        """Rebuild a reservation from :meth:`as_dict` (inside the order task)."""
        return cls(
            item=str(value["item"]),
            id=str(value["id"]),
            buyer=str(value["buyer"]),
            qty=int(value["qty"]),
            taken_at=None if value.get("taken_at") is None else int(value["taken_at"]),
            data=dict(value.get("data") or {}),
        )

    @classmethod
    def from_record(cls, item: str, id: Any, record: Any) -> Reservation:
        """Parse the ``"<qty>:<taken at>:<buyer>"`` value the take script stores."""
        qty, taken_at, buyer = to_text(record).split(":", 2)
        return cls(item=item, id=to_text(id), buyer=buyer, qty=int(qty), taken_at=int(taken_at))


@dataclass(frozen=True)
class Take:
    """What one take did: the result, the reservation when it is OK, and the units left."""

    result: TakeResult
    remaining: int
    reservation: Reservation | None = None
    #: ``RATE_LIMITED``: seconds until the admission limit would admit the take (else 0.0)
    retry_after: float = 0.0

    @property
    def ok(self) -> bool:
        """True when units were taken."""
        return self.result is TakeResult.OK

    def __bool__(self) -> bool:
        return self.ok


@dataclass(frozen=True)
class StockStats:
    """A consistent snapshot of one stock (one script), for the admin and the shop page."""

    item: str
    exists: bool
    remaining: int
    taken: int
    restored: int
    buyers: int
    reservations: int
    opens: datetime | None
    closes: datetime | None
    now: datetime
    #: refused takes, by reason: ``duplicate``, ``not_open``, ``ended``, ``admission`` (counters
    #: the take script keeps in the stock's meta hash), then ``sold_out_redis`` (answered sold
    #: out by Redis: the take script or a process's one-``GET`` probe) and ``sold_out_local``
    #: (from a process's local flag, no Redis call). The take writes nothing when it answers
    #: sold out: each process counts those and adds them every few seconds
    #: (:mod:`~django_redislock.inventory.sold_out_counts`), so they are up to that late.
    refused: dict[str, int] = field(default_factory=dict)

    @property
    def sold(self) -> int:
        """Units that are taken and were not given back."""
        return self.taken - self.restored

    @property
    def state(self) -> str:
        """``"unknown"``, ``"not_open"``, ``"ended"``, ``"sold_out"`` or ``"open"``."""
        if not self.exists:
            return TakeResult.UNKNOWN.value
        if self.opens is not None and self.now < self.opens:
            return TakeResult.NOT_OPEN.value
        if self.closes is not None and self.now >= self.closes:
            return TakeResult.ENDED.value
        return TakeResult.SOLD_OUT.value if self.remaining <= 0 else "open"

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready form (the shop's polling endpoint returns it)."""
        return {
            "item": self.item,
            "state": self.state,
            "remaining": self.remaining,
            "sold": self.sold,
            "taken": self.taken,
            "restored": self.restored,
            "buyers": self.buyers,
            "reservations": self.reservations,
            "opens": self.opens.isoformat() if self.opens else None,
            "closes": self.closes.isoformat() if self.closes else None,
        }


@dataclass(frozen=True)
class Reconciliation:
    """What :meth:`~django_redislock.inventory.Stock.reconcile` found (and fixed)."""

    item: str
    exists: bool
    remaining: int
    taken: int
    restored: int
    #: units held by live reservations (the records' sum)
    reserved: int
    reservations: int
    buyers: int
    #: buyers holding a live reservation who were not in the buyers set
    missing_buyers: int
    #: reservation records that could not be read (not ``qty:time:buyer``)
    bad_records: int
    fixed: bool

    @property
    def drift(self) -> int:
        """Units the ``taken`` counter was off by (taken - restored - reserved)."""
        return self.taken - self.restored - self.reserved

    @property
    def clean(self) -> bool:
        """True when the books agree with the records."""
        return self.drift == 0 and self.missing_buyers == 0 and self.bad_records == 0
