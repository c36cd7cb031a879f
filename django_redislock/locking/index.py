"""The admin index: which locks are held, by whom, without ``KEYS`` or ``SCAN``.

Every grant records its lock name in the index of its bucket (see :mod:`.keys`):
``ix:n`` (names, for paging in name order) and ``ix:e`` (expiry, so names of
released or expired locks are hidden at once and pruned later). The holder's
details (owner, fence, count, metadata) live in the lock's own keys and expire
with the hold, so a grant pays nothing extra for them.

A page costs two round trips on a single server (one per master on a cluster
for each), whatever the number of held locks: one script per bucket, all in
one pipeline, returns the page's names; one pipeline then reads their holders.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from ..calls.node import Node
from ..exceptions import InvalidArgument
from ..wire import to_text
from .keys import BucketKeys, bucket_keys, check_name, lock_key
from .pipeline import run_scripts

#: Most expired entries one listing script prunes per bucket.
PRUNE_LIMIT = 5000
#: Largest page ``held_locks`` returns.
MAX_PAGE = 1000
#: Most index entries (live or stale) one listing script looks at per bucket.
SCAN_LIMIT = 10_000


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
    waiters: int = 0

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (``acquired_at`` as ISO 8601)."""
        data = dict(self.__dict__)
        data["acquired_at"] = self.acquired_at.isoformat() if self.acquired_at else None
        return data


@dataclass(frozen=True)
class LockPage:
    """A page of held locks, the cursors of the pages beside it and the number held in all.

    ``next_after`` is the ``after`` of the next page and ``previous_before``
    the ``before`` of the previous one; None where the listing is known to
    end. A page given ``after`` can't know whether earlier names remain, so
    it offers its first name as the way back.
    """

    locks: list[HeldLock]
    next_after: str | None
    total: int
    previous_before: str | None = None


def _lex_range(prefix: str, after: str | None, before: str | None) -> tuple[bytes, bytes]:
    """ZRANGEBYLEX bounds of the names starting with ``prefix``, narrowed by a cursor.

    A cursor outside the prefix's names leaves that bound alone: one below
    them (``after``) or above them (``before``) excludes nothing, and one on
    the far side makes the range empty, which Redis answers with no names.
    """
    end = prefix.encode() + b"\xff"  # above every name with the prefix: UTF-8 has no 0xff byte
    low = b"[" + prefix.encode() if prefix else b"-"
    if after is not None and (not prefix or after >= prefix):
        low = b"(" + after.encode()
    high = b"[" + end if prefix else b"+"
    if before is not None and (not prefix or before.encode() < end):
        high = b"(" + before.encode()
    return low, high


def check_page(prefix: Any, limit: Any, after: Any, before: Any) -> None:
    """Raise :class:`InvalidArgument` for arguments :func:`page` can't list with.

    Also called by the Redlock listing before it asks the masters, so a bad
    argument is reported as such rather than as masters that failed to answer.
    """
    if not isinstance(prefix, str) or (prefix and check_name(prefix, "prefix") != prefix):
        raise InvalidArgument(f"prefix must be a string, not {prefix!r}")
    if after is not None and before is not None:
        raise InvalidArgument("give after (the next page) or before (the previous page), not both")
    if after is not None:
        check_name(after, "after")
    if before is not None:
        check_name(before, "before")
    if isinstance(limit, bool) or not isinstance(limit, int) or not 0 <= limit <= MAX_PAGE:
        raise InvalidArgument(f"limit must be an int from 0 to {MAX_PAGE}, got {limit!r}")


def page_cursors(
    shown: list[str], end: str | None, after: str | None, before: str | None
) -> tuple[str | None, str | None]:
    """``(next_after, previous_before)`` of a page showing the names ``shown``, ascending.

    ``end`` is the name where the walk stopped with more names beyond it
    (None when it reached the last name). Forward, that is the next page's
    cursor, and a page given ``after`` offers its first name as the way back
    (earlier names may exist; if none do, the previous page is empty and the
    first page is still one click away). Backward (``before``), it is the
    previous page's cursor, and the page we came from follows the last name.
    """
    if before is not None:
        return (shown[-1] if shown else None), end
    return end, (shown[0] if after is not None and shown else None)


def _holder(name: str, expiry: float, now: int, reads: list[Any]) -> HeldLock | None:
    """One row from the reads of a lock's keys (see :func:`_read_holders`), or None if gone."""
    hold, writer, readers, reader, waiters = reads
    if hold[0] is not None:
        owner, fence, count, meta = hold
    elif writer[0] is not None:
        owner, fence, meta = writer
        count = 1
    elif int(readers or 0) > 0:
        owner, fence, meta = b"", reader[1], reader[0]
        count = int(readers)
    else:
        return None  # released or expired since the index was read
    info: dict[str, Any] = {}
    if meta:
        try:
            info = json.loads(meta)
        except ValueError:
            info = {}
    acquired = info.get("acquired_at")
    return HeldLock(
        name=name,
        kind=str(info.get("kind", "")),
        owner=to_text(owner),
        host=str(info.get("host", "")),
        pid=info.get("pid"),
        thread=info.get("thread"),
        task=info.get("task"),
        acquired_at=(
            datetime.fromtimestamp(acquired, tz=timezone.utc)
            if isinstance(acquired, (int, float))
            else None
        ),
        expires_in=max(0.0, (expiry - now) / 1000),
        ttl=info.get("ttl"),
        fence=int(fence) if fence is not None else None,
        count=int(count or 1),
        waiters=int(waiters or 0),
    )


def _read_holders(backend: Node, names: list[str]) -> list[list[Any]]:
    """The holder fields of each lock in ``names``: one pipeline of plain reads."""
    if not names:
        return []
    pipe = backend.client.pipeline(transaction=False)
    now_ms = int(time.time() * 1000)  # waiters past their deadline (server ms) are not counted
    for name in names:
        pipe.hmget(lock_key(backend, name, "l"), "o", "f", "n", "m")
        pipe.hmget(lock_key(backend, name, "rw"), "o", "f", "m")
        pipe.zcard(lock_key(backend, name, "rr"))
        pipe.hmget(lock_key(backend, name, "rm"), "m", "f")
        pipe.zcount(lock_key(backend, name, "q"), now_ms, "+inf")
    with backend.errors():
        replies = pipe.execute()
    return [replies[i : i + 5] for i in range(0, len(replies), 5)]


def _list_names(
    backend: Node, bounds: tuple[bytes, bytes], fetch: int, backward: bool
) -> tuple[list[tuple[str, float, int]], int, str | None]:
    """Up to ``fetch`` ``(name, expiry, now)`` per bucket in walk order, the total, the stop.

    Every bucket runs ``lock_list`` in one pipeline; a name lives in one
    bucket only, so merging the buckets' walks is a sort. A bucket behind
    more stale names than one call looks at (``SCAN_LIMIT``) says where it
    gave up; nothing beyond the nearest such point is known, so the page ends
    there and the next one starts from it.
    """
    low, high = bounds
    args = [low, high, fetch, PRUNE_LIMIT, "r" if backward else "", SCAN_LIMIT]
    buckets = [BucketKeys.build(backend, b) for b in range(backend.options["LOCK_INDEX_BUCKETS"])]
    calls = [("lock_list", [b.names, b.expiry], args) for b in buckets]
    listed: list[tuple[str, float, int]] = []
    stops: list[str] = []
    total = 0
    for result in run_scripts(backend, calls):
        if isinstance(result, Exception):
            raise result
        now, live, stop = int(result[0]), int(result[1]), to_text(result[2])
        total += live
        if stop:
            stops.append(stop)
        rows = result[3:]
        listed += [(to_text(rows[i]), float(rows[i + 1]), now) for i in range(0, len(rows), 2)]
    listed.sort(reverse=backward)
    if not stops:
        return listed, total, None
    stop = max(stops) if backward else min(stops)
    inside = [row for row in listed if (row[0] >= stop if backward else row[0] <= stop)]
    return inside, total, stop


def page(
    backend: Node,
    prefix: str = "",
    limit: int = 100,
    after: str | None = None,
    before: str | None = None,
) -> LockPage:
    """Held locks whose name starts with ``prefix``, in name order, after ``after``.

    With ``before`` instead, the ``limit`` names just below it, walked
    backward (the page that ends where the page starting at ``before``
    began) and shown in name order like any page.
    """
    check_page(prefix, limit, after, before)
    backward = before is not None
    fetch = limit + 1 if limit else 0  # one more than a page tells whether another page exists
    bounds = _lex_range(prefix, after, before)
    walked, total, stop = _list_names(backend, bounds, fetch, backward)
    listed = walked[:limit]
    end = listed[-1][0] if len(walked) > limit and listed else stop
    if backward:
        listed.reverse()
    reads = _read_holders(backend, [name for name, _, _ in listed])
    found = [_holder(*row, read) for row, read in zip(listed, reads, strict=True)]
    held = [row for row in found if row is not None]
    next_after, previous_before = page_cursors([n for n, _, _ in listed], end, after, before)
    return LockPage(held, next_after, total, previous_before)


def count(backend: Node) -> int:
    """How many locks are held on this alias (one pipeline over the buckets)."""
    return page(backend, limit=0).total


def force_release_call(
    backend: Node, name: str, fence: int | None = None
) -> tuple[str, list[str], list[Any]]:
    """The script call that ends every hold on ``name`` and bumps its bucket's fence.

    With ``fence``, only a mutex or write hold with that fence is ended (the
    script returns -1 and changes nothing otherwise).
    """
    from .base import SIGNAL_MS

    check_name(name)
    ix = bucket_keys(backend, name)
    parts = ("l", "rw", "rr", "rm", "ri", "s", "sr", "sw")
    keys = [lock_key(backend, name, part) for part in parts]
    keys += [ix.fence, ix.names, ix.expiry]
    return "lock_force_release", keys, [name, SIGNAL_MS, "" if fence is None else fence]
