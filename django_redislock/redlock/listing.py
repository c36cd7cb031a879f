"""Held locks of a Redlock alias: each master's index page, merged by quorum.

Every master keeps the same admin index as a single server (each grant runs
the ordinary ``lock_acquire`` script there). A name is listed when a quorum
of the masters that answered list it; leftovers of failed attempts on a
minority of masters are not. Pages merge in walk order: each master returns
its first ``limit`` names after the cursor (its last ``limit`` before it,
for a previous page), and only names up to the nearest point where a master
that had more stopped are complete, so a page may be shorter than ``limit``
and still carry a cursor.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from typing import Any

from ..exceptions import ConnectionFailed
from ..locking.index import HeldLock, LockPage, check_page, page, page_cursors
from .masters import Quorum


def _answered(backend: Quorum, pages: list[Any]) -> list[LockPage]:
    answered = [p for p in pages if not isinstance(p, Exception)]
    if len(answered) < backend.quorum:
        errors = [p for p in pages if isinstance(p, Exception)]
        raise ConnectionFailed(
            f"only {len(answered)} of {len(pages)} Redlock masters of REDISLOCK_LOCKS"
            f"[{backend.alias!r}] answered the listing ({errors[0] if errors else ''})"
        )
    return answered


def _merge(entries: list[HeldLock], quorum: int) -> HeldLock:
    """One row per name: the largest fence, the time a quorum still holds it, and the waiters
    a quorum counts (a waiting try is recorded on every master it reaches; a try granted on
    a quorum may stay recorded on a master that refused it, until its deadline)."""
    expires = sorted((e.expires_in for e in entries), reverse=True)[quorum - 1]
    best = max(entries, key=lambda e: e.fence or 0)
    waiters = sorted((e.waiters for e in entries), reverse=True)[quorum - 1]
    return dataclasses.replace(best, expires_in=expires, waiters=waiters)


def _stop(one: LockPage, backward: bool) -> str | None:
    """Where a master's walk stopped with more names beyond it (None: it listed them all)."""
    return one.previous_before if backward else one.next_after


def merged_page(
    backend: Quorum,
    prefix: str = "",
    limit: int = 100,
    after: str | None = None,
    before: str | None = None,
) -> LockPage:
    """Held locks of a Redlock alias in name order (see the module docstring)."""
    check_page(prefix, limit, after, before)  # a bad argument is not a failed master
    pages = _answered(backend, backend.each(lambda m: page(m, prefix, limit, after, before)))
    quorum = backend.quorum
    backward = before is not None
    stops = [stop for stop in (_stop(p, backward) for p in pages) if stop is not None]
    cutoff = (max if backward else min)(stops) if stops else None

    def complete(name: str) -> bool:
        """Every master that answered has walked past ``name`` (or listed all it has)."""
        return cutoff is None or (name >= cutoff if backward else name <= cutoff)

    by_name: dict[str, list[HeldLock]] = defaultdict(list)
    for one in pages:
        for held in one.locks:
            if complete(held.name):
                by_name[held.name].append(held)
    walked = sorted(by_name.items(), reverse=backward)
    rows = [_merge(found, quorum) for _, found in walked if len(found) >= quorum]
    end = cutoff
    if len(rows) > limit:
        rows = rows[:limit]
        end = rows[-1].name if rows else cutoff
    if backward:
        rows.reverse()
    next_after, previous_before = page_cursors([r.name for r in rows], end, after, before)
    totals = sorted((p.total for p in pages), reverse=True)
    return LockPage(rows, next_after, totals[quorum - 1], previous_before)
