"""The records of a lock history the checks work on: holds, fenced writes, violations.

See :mod:`tests.lockhistory.checker` for what a holder may believe and how the records are
read; :mod:`tests.lockhistory.fairorder` has the fair lock's own record.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: Seconds taken off every believed deadline: Redis stores a TTL in whole milliseconds and
#: checks expiry against its own reading of the clock.
MARGIN = 0.005


@dataclass(frozen=True)
class Hold:
    """One hold as its holder saw it.

    ``identity`` is who holds it for the purpose of exclusion: an explicit ``owner=`` label
    (two holds of one owner are one holder: a reentrant count) or the grant's own id (a
    re-entry and a downgrade share the grant of the hold they continue). ``mode`` is ``"x"``
    (mutex, reentrant, write), ``"r"`` (read) or ``"p"`` (a semaphore's permit: at most
    ``permits`` believed at once). ``fresh`` says the fence was issued for this hold's own
    acquire (not a re-entry or a downgrade), which the fence order is checked on.
    """

    worker: str
    op: str
    name: str
    mode: str
    identity: str
    fence: int
    invoke: float
    ok: float
    until: float
    released: float | None = None
    lost_at: float | None = None
    fresh: bool = True
    kind: str = "mutex"
    permits: int = 0

    @property
    def end(self) -> float:
        """The end of what the holder could believe."""
        ends = [self.until - MARGIN]
        ends += [t for t in (self.released, self.lost_at) if t is not None]
        return min(ends)

    @classmethod
    def of(cls, rec: dict[str, Any]) -> Hold:
        return cls(
            worker=str(rec["worker"]),
            op=str(rec["op"]),
            name=rec["name"],
            mode=rec.get("mode", "x"),
            identity=str(rec.get("identity") or rec["op"]),
            fence=int(rec["fence"]),
            invoke=float(rec["invoke"]),
            ok=float(rec["ok"]),
            until=float(rec["until"]),
            released=rec.get("released"),
            lost_at=rec.get("lost_at"),
            fresh=bool(rec.get("fresh", True)),
            kind=rec.get("kind", "mutex"),
            permits=int(rec.get("permits", 0)),
        )


@dataclass(frozen=True)
class Write:
    """One fenced write ``UPDATE ... SET value = <read + 1>, fence = f WHERE fence < f``."""

    worker: str
    name: str
    fence: int
    invoke: float
    done: float
    accepted: bool

    @classmethod
    def of(cls, rec: dict[str, Any]) -> Write:
        return cls(
            str(rec["worker"]),
            rec["name"],
            int(rec["fence"]),
            float(rec["invoke"]),
            float(rec["done"]),
            bool(rec["accepted"]),
        )


@dataclass
class Violation:
    type: str
    name: str
    detail: str
    records: list[Any] = field(default_factory=list)

    def __str__(self) -> str:
        return f"{self.type} on {self.name!r}: {self.detail}"
