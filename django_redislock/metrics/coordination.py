"""Semaphores and fair locks in the scrape, and acquisitions counted per lock kind.

From Redis, per lock alias: the coordination index (:mod:`~django_redislock.locking.coordindex`,
two round trips whatever the number of names) gives, per kind (``semaphore``, ``fair``), how
many are in use, the permits or holds held and the live waiters. Series are per alias and
kind, never per name (names are unbounded). The numbers cover the first
:data:`~django_redislock.locking.coordindex.MAX_LISTED` primitives in use (by name).

In this process, like the lock histograms (:mod:`.histograms`): every ``acquire()`` of a
lock, permit or fair lock that returned is counted by alias, kind and outcome (``granted``;
``timeout`` when a waiting acquire's wait ran out; ``busy`` when a try that does not wait
found it taken), by the lock code (:mod:`django_redislock.locking.timings`): a dict
operation per acquire, no round trip.
"""

from __future__ import annotations

from typing import cast

from ..calls.node import Node
from ..locking import coordindex
from ..locking.timings import Acquisitions, acquisitions

__all__ = ["KINDS", "OUTCOMES", "Acquisitions", "acquisitions", "read_coordination"]

#: Kinds of the Redis-read gauges, always exported (0 when none is in use).
KINDS = ("semaphore", "fair", "latch")
#: Outcomes of the acquisitions counter.
OUTCOMES = ("granted", "timeout", "busy")


def read_coordination(alias: str) -> dict[str, tuple[int, int, int]] | None:
    """``{kind: (in use, held, live waiters)}`` of a lock alias; None if it has none."""
    from ..handlers import locks

    backend = locks[alias]
    if not getattr(backend, "supports_coordination", False):
        return None
    listing = coordindex.listing(cast(Node, backend), shown=1)
    out = {kind: (0, 0, 0) for kind in KINDS}
    for entry in listing.entries:
        used, held, waiting = out[entry.kind]
        out[entry.kind] = (used + 1, held + entry.holder_count, waiting + entry.waiter_count)
    return out
