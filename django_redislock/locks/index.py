"""The admin index: which locks are held, by whom, without ``KEYS`` or ``SCAN``.

Every grant records its holder in the index of its bucket (see :mod:`.keys`):
``ix:n`` (names, for paging in name order), ``ix:e`` (expiry, so entries of
expired locks are pruned by the next script that touches the bucket), ``ix:m``
(holder metadata as JSON) and ``ix:c`` (hold count or readers). A page reads
every bucket with one script each, all in one pipeline: one round trip on a
single server, one per master on a cluster, whatever the number of held locks.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from ..exceptions import InvalidArgument
from .keys import BucketKeys, check_name
from .pipeline import run_scripts

#: Most expired entries one listing script prunes per bucket.
PRUNE_LIMIT = 5000
#: Largest page ``held_locks`` returns.
MAX_PAGE = 1000


@dataclass(frozen=True)
class HeldLock:
    """One held lock as the admin and ``list_locks`` show it."""

    name: str
    kind: str
    owner: str
    host: str
    pid: int | None
    thread: str | None
    task: str | None
    acquired_at: datetime | None
    expires_in: float
    ttl: float | None
    fence: int | None
    count: int

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (``acquired_at`` as ISO 8601)."""
        data = dict(self.__dict__)
        data["acquired_at"] = self.acquired_at.isoformat() if self.acquired_at else None
        return data


@dataclass(frozen=True)
class LockPage:
    """A page of held locks, the cursor of the next page and the number held in all."""

    locks: list[HeldLock]
    next_after: str | None
    total: int


def _lex_range(prefix: str, after: str | None) -> tuple[bytes, bytes]:
    low = b"[" + prefix.encode() if prefix else b"-"
    if after is not None and (not prefix or after >= prefix):
        low = b"(" + after.encode()
    high = b"[" + prefix.encode() + b"\xff" if prefix else b"+"
    return low, high


def _parse(*row: bytes, now: int) -> HeldLock:
    name, expiry, meta, count = row
    info: dict[str, Any] = {}
    if meta:
        try:
            info = json.loads(meta)
        except ValueError:
            info = {}
    acquired = info.get("acquired_at")
    return HeldLock(
        name=name.decode(),
        kind=str(info.get("kind", "")),
        owner=str(info.get("owner", "")),
        host=str(info.get("host", "")),
        pid=info.get("pid"),
        thread=info.get("thread"),
        task=info.get("task"),
        acquired_at=(
            datetime.fromtimestamp(acquired, tz=timezone.utc)
            if isinstance(acquired, (int, float))
            else None
        ),
        expires_in=max(0.0, (float(expiry) - now) / 1000),
        ttl=info.get("ttl"),
        fence=info.get("fence"),
        count=int(count) if count and info.get("kind") in ("reentrant", "read") else 1,
    )


def page(backend: Any, prefix: str = "", limit: int = 100, after: str | None = None) -> LockPage:
    """Held locks whose name starts with ``prefix``, in name order, after the name ``after``."""
    if not isinstance(prefix, str) or (prefix and check_name(prefix, "prefix") != prefix):
        raise InvalidArgument(f"prefix must be a string, not {prefix!r}")
    if after is not None:
        check_name(after, "after")
    if isinstance(limit, bool) or not isinstance(limit, int) or not 0 <= limit <= MAX_PAGE:
        raise InvalidArgument(f"limit must be an int from 0 to {MAX_PAGE}, got {limit!r}")
    low, high = _lex_range(prefix, after)
    buckets = [BucketKeys.build(backend, b) for b in range(backend.options["LOCK_INDEX_BUCKETS"])]
    fetch = limit + 1 if limit else 0  # one more than a page tells whether another page exists
    calls = [
        ("lock_list", [b.names, b.expiry, b.meta, b.count], [low, high, fetch, PRUNE_LIMIT])
        for b in buckets
    ]
    found: list[HeldLock] = []
    total = 0
    for result in run_scripts(backend, calls):
        if isinstance(result, Exception):
            raise result
        now, live = int(result[0]), int(result[1])
        total += live
        rows = result[2:]
        found += [_parse(*rows[i : i + 4], now=now) for i in range(0, len(rows), 4)]
    found.sort(key=lambda held: held.name)
    more = len(found) > limit
    found = found[:limit]
    next_after = found[-1].name if more and found else None
    return LockPage(found, next_after, total)


def count(backend: Any) -> int:
    """How many locks are held on this alias (one pipeline over the buckets)."""
    return page(backend, limit=0).total


def force_release_call(backend: Any, name: str) -> tuple[str, list[str], list[Any]]:
    """The script call that ends every hold on ``name`` and bumps its bucket's fence."""
    from .base import SIGNAL_MS
    from .keys import bucket_keys, lock_key

    check_name(name)
    ix = bucket_keys(backend, name)
    parts = ("l", "rw", "rr", "ri", "s", "sr", "sw")
    keys = [lock_key(backend, name, part) for part in parts]
    keys += [ix.fence, ix.names, ix.expiry, ix.meta, ix.count]
    return "lock_force_release", keys, [name, SIGNAL_MS]
