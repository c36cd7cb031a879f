"""Held locks of a Redlock alias: each master's index page, merged by quorum.

Every master keeps the same admin index as a single server (each grant runs
the ordinary ``lock_acquire`` script there). A name is listed when a quorum
of the masters that answered list it; leftovers of failed attempts on a
minority of masters are not. Pages merge in name order: each master returns
its first ``limit`` names after the cursor, and only names up to the
smallest last name of a master that had more are complete, so a page may be
shorter than ``limit`` and still carry a cursor.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from typing import Any

from ..exceptions import ConnectionFailed
from ..locks.index import HeldLock, LockPage, page


def _answered(backend: Any, pages: list[Any]) -> list[LockPage]:
    answered = [p for p in pages if not isinstance(p, Exception)]
    if len(answered) < backend.quorum:
        errors = [p for p in pages if isinstance(p, Exception)]
        raise ConnectionFailed(
            f"only {len(answered)} of {len(pages)} Redlock masters of REDISLOCK_LOCKS"
            f"[{backend.alias!r}] answered the listing ({errors[0] if errors else ''})"
        )
    return answered


def _merge(entries: list[HeldLock], quorum: int) -> HeldLock:
    """One row per name: the largest fence, and the time a quorum still holds it."""
    expires = sorted((e.expires_in for e in entries), reverse=True)[quorum - 1]
    best = max(entries, key=lambda e: e.fence or 0)
    return dataclasses.replace(best, expires_in=expires)


def merged_page(
    backend: Any, prefix: str = "", limit: int = 100, after: str | None = None
) -> LockPage:
    """Held locks of a Redlock alias in name order (see the module docstring)."""
    pages = _answered(backend, backend.each(lambda m: page(m, prefix, limit, after)))
    quorum = backend.quorum
    cut = [p.locks[-1].name for p in pages if p.next_after is not None and p.locks]
    cutoff = min(cut) if cut else None
    by_name: dict[str, list[HeldLock]] = defaultdict(list)
    for one in pages:
        for held in one.locks:
            if cutoff is None or held.name <= cutoff:
                by_name[held.name].append(held)
    rows = [_merge(found, quorum) for _, found in sorted(by_name.items()) if len(found) >= quorum]
    next_after = cutoff
    if len(rows) > limit:
        rows = rows[:limit]
        next_after = rows[-1].name if rows else cutoff
    totals = sorted((p.total for p in pages), reverse=True)
    return LockPage(rows, next_after, totals[quorum - 1])
