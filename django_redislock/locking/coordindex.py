"""The coordination index: which semaphores, fair locks and latches are in use, without ``SCAN``.

Every script that grants a permit or a fair-lock hold, or queues a waiter, records the
primitive's main key (``<base>:sp:<name>`` for a semaphore, ``<base>:fl:<name>`` for a fair
lock) in its bucket's ``ix:c`` zset, scored by the latest deadline it set (a permit's or the
hold's TTL, a waiter's lease); the watchdog's renewals move it later. A latch
(``<base>:ln:<name>``) is recorded by the script that creates or counts it down (scored by
its expiry) and by its waiters' reads (their leases). The release that leaves
nothing held and no live waiter removes the entry, and an entry whose deadline passed (its
holders and waiters all died) is pruned by the next listing. The index shares the bucket's
slot with the primitive's keys (see :mod:`.keys`), so it is kept in the same script as the
grant, on a Cluster too.

A listing costs two round trips on a single server (one per master on a Cluster for each):
one ``coord_list`` script per bucket in one pipeline, then one read-only script per listed
primitive (``admin_semaphore_get``, ``admin_fair_get``, ``admin_latch_get``) in one pipeline.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ..calls.node import Node
from ..wire import to_text
from .keys import BucketKeys, bucket_keys, check_name, lock_key
from .pipeline import run_scripts

#: Most primitives one listing returns (soonest deadline first, then shown by name).
MAX_LISTED = 1000
#: Most holders and waiters read per primitive.
SHOWN = 50
#: Most stale index entries one listing prunes per bucket.
PRUNE_LIMIT = 1000
#: Index key part -> kind.
KINDS = {"sp": "semaphore", "fl": "fair", "ln": "latch"}


@dataclass(frozen=True)
class Holder:
    """A permit of a semaphore or the hold of a fair lock."""

    id: str
    expires_in: float
    fence: int | None
    info: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Waiter:
    """A queued caller: its token, its arrival number and how long its place is kept."""

    owner: str
    arrival: int
    lease_left: float | None


@dataclass(frozen=True)
class Coordinated:
    """One semaphore or fair lock in use, with its holders and waiters (first :data:`SHOWN`)."""

    kind: str
    name: str
    holders: list[Holder]
    holder_count: int
    waiters: list[Waiter]
    waiter_count: int
    #: A latch's remaining count (None for the other kinds, and for a latch gone).
    count: int | None = None


@dataclass(frozen=True)
class CoordListing:
    """The primitives in use on an alias (up to ``limit``) and how many there are in all."""

    entries: list[Coordinated]
    total: int


def _num(value: Any) -> float:
    return float(to_text(value)) if value not in (None, b"", "") else 0.0


def _waiters(flat: list[Any], now: int) -> list[Waiter]:
    return [
        Waiter(
            to_text(flat[i]),
            int(_num(flat[i + 1])),
            None if flat[i + 2] in (b"", "", None) else max(0.0, (_num(flat[i + 2]) - now) / 1000),
        )
        for i in range(0, len(flat), 3)
    ]


def _fence_of(permit_id: str) -> int | None:
    tail = permit_id.rpartition("@")[2]
    return int(tail) if tail.isdigit() else None


def _semaphore(name: str, reply: Any) -> Coordinated:
    now_ms, _, _, permits, waiters, live_permits, live_waiters = reply
    now = int(_num(now_ms))
    holders = []
    for i in range(0, len(permits), 2):
        left = (_num(permits[i + 1]) - now) / 1000
        if left > 0:  # an expired permit is reclaimed by the next acquire: not held
            holders.append(Holder(to_text(permits[i]), left, _fence_of(to_text(permits[i]))))
    live = [w for w in _waiters(waiters, now) if w.lease_left]
    return Coordinated("semaphore", name, holders, int(live_permits), live, int(live_waiters))


def _fair(name: str, reply: Any) -> Coordinated:
    now_ms, owner, fence, meta, pttl, _, waiters, live_waiters = reply
    now = int(_num(now_ms))
    holders = []
    if to_text(owner) and int(pttl) > 0:
        try:
            info = json.loads(to_text(meta)) if meta else {}
        except ValueError:
            info = {}
        holders.append(
            Holder(to_text(owner), int(pttl) / 1000, int(_num(fence)) if fence else None, info)
        )
    live = [w for w in _waiters(waiters, now) if w.lease_left]
    return Coordinated("fair", name, holders, len(holders), live, int(live_waiters))


def _latch(name: str, reply: Any) -> Coordinated:
    now_ms, count, _, waiters, live_waiters = reply
    now = int(_num(now_ms))
    listed = [
        Waiter(to_text(waiters[i]), 0, max(0.0, (_num(waiters[i + 1]) - now) / 1000))
        for i in range(0, len(waiters), 2)
    ]
    left = None if count in (b"", "", None) else int(count)
    return Coordinated("latch", name, [], 0, listed, int(live_waiters), left)


def read_call(
    backend: Node, kind: str, name: str, shown: int = SHOWN
) -> tuple[str, list[str], list[Any]]:
    """The read-only script call that reads semaphore or fair lock ``name``."""
    if kind == "semaphore":
        keys = [lock_key(backend, name, part) for part in ("sp", "sq", "sd")]
        return "admin_semaphore_get", keys, [shown]
    if kind == "latch":
        keys = [lock_key(backend, name, part) for part in ("ln", "lw")]
        return "admin_latch_get", keys, [shown]
    keys = [lock_key(backend, name, part) for part in ("fl", "fq", "fw")]
    return "admin_fair_get", keys, [shown]


def parse(kind: str, name: str, reply: Any) -> Coordinated:
    """The :class:`Coordinated` of a :func:`read_call` reply."""
    if kind == "latch":
        return _latch(name, reply)
    return _semaphore(name, reply) if kind == "semaphore" else _fair(name, reply)


def _list_keys(backend: Node, limit: int) -> tuple[list[tuple[str, str]], int]:
    """``(kind, name)`` of up to ``limit`` primitives per bucket, and the live total."""
    count = backend.options["LOCK_INDEX_BUCKETS"]
    buckets = [BucketKeys.build(backend, b) for b in range(count)]
    calls = [("coord_list", [b.coord], [limit, PRUNE_LIMIT]) for b in buckets]
    found: list[tuple[str, str]] = []
    total = 0
    for bucket, result in enumerate(run_scripts(backend, calls)):
        if isinstance(result, Exception):
            raise result
        total += int(result[1])
        base = backend.key(f"lk{bucket}") + ":"
        for raw in result[2::2]:
            key = to_text(raw)
            if not key.startswith(base):
                continue  # another prefix's entry (never written by this alias)
            part, _, name = key[len(base) :].partition(":")
            if part in KINDS:
                found.append((KINDS[part], name))
    return found, total


def listing(backend: Node, limit: int = MAX_LISTED, shown: int = SHOWN) -> CoordListing:
    """The semaphores and fair locks in use on ``backend``, by kind and name.

    Reads up to ``limit`` of them (those whose latest deadline comes soonest, per bucket,
    then the first ``limit`` by name); ``total`` counts every live index entry. A primitive
    whose holders and waiters all ended since the index was read is left out.
    """
    keys, total = _list_keys(backend, limit)
    keys = sorted(keys)[:limit]
    replies = run_scripts(backend, [read_call(backend, kind, name, shown) for kind, name in keys])
    entries = []
    for (kind, name), reply in zip(keys, replies, strict=True):
        if isinstance(reply, Exception):
            raise reply
        entry = parse(kind, name, reply)
        if entry.holder_count or entry.waiter_count or entry.count is not None:
            entries.append(entry)
    entries.sort(key=lambda e: (e.kind, e.name))
    return CoordListing(entries, total)


def find(backend: Node, kind: str, name: str, shown: int = SHOWN) -> Coordinated:
    """Semaphore or fair lock ``name`` read now (one script call)."""
    check_name(name)
    script, keys, args = read_call(backend, kind, name, shown)
    reply = run_scripts(backend, [(script, keys, args)])[0]
    if isinstance(reply, Exception):
        raise reply
    return parse(kind, name, reply)


def force_release_permit(backend: Node, name: str, permit_id: str) -> bool:
    """End permit ``permit_id`` of semaphore ``name`` whoever holds it; True if it was held.

    The queued callers are woken to take the freed permit in arrival order; the holder's
    next ``extend()``, ``ensure_held()`` or ``release()`` finds its permit gone.
    """
    from .base import SIGNAL_MS
    from .semaphore import WAKE_CAP

    check_name(name)
    keys = [lock_key(backend, name, part) for part in ("sp", "sq", "sd", "ss")]
    keys.append(bucket_keys(backend, name).coord)
    call = ("semaphore_force_release", keys, [permit_id, SIGNAL_MS, WAKE_CAP])
    (result,) = run_scripts(backend, [call])
    if isinstance(result, Exception):
        raise result
    return int(result) == 1


def force_release_fair(backend: Any, name: str, fence: int) -> bool:
    """End fair lock ``name``'s hold if it still has ``fence``; True if it ended.

    Bumps the bucket's fence (as the mutex's force release does) and wakes the first live
    waiter, whose try is then granted.
    """
    check_name(name)
    ix = bucket_keys(backend, name)
    keys = [lock_key(backend, name, part) for part in ("fl", "fq", "fw")]
    call = ("fair_force_release", [*keys, ix.coord, ix.fence], [fence])
    (result,) = run_scripts(backend, [call])
    if isinstance(result, Exception):
        raise result
    if int(result[0]) != 1:
        return False
    token = to_text(result[1])
    if token:
        backend.fair_lock(name)._send_wake(token)
    return True
