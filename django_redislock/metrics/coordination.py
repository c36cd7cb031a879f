"""Semaphores and fair locks in the scrape, and acquisitions counted per lock kind.

From Redis, per lock alias: the coordination index (:mod:`~django_redislock.locking.coordindex`,
two round trips whatever the number of names) gives, per kind (``semaphore``, ``fair``), how
many are in use, the permits or holds held and the live waiters. Series are per alias and
kind, never per name (names are unbounded). The numbers cover the first
:data:`~django_redislock.locking.coordindex.MAX_LISTED` primitives in use (by name).

In this process, like the lock histograms (:mod:`.histograms`): every ``acquire()`` of a
lock, permit or fair lock that returned is counted by alias, kind and outcome (``granted``;
``timeout`` when a waiting acquire's wait ran out; ``busy`` when a try that does not wait
found it taken), from the ``lock_acquired`` and ``lock_not_acquired`` signals: a dict
operation per acquire, no round trip.
"""

from __future__ import annotations

import threading
from typing import Any, cast

from django.dispatch import receiver

from ..calls.node import Node
from ..locking import coordindex
from ..signals import lock_acquired, lock_not_acquired

#: Kinds of the Redis-read gauges, always exported (0 when none is in use).
KINDS = ("semaphore", "fair", "latch")
#: Outcomes of the acquisitions counter.
OUTCOMES = ("granted", "timeout", "busy")


class Acquisitions:
    """Acquire outcomes per ``(alias, kind, outcome)`` in this process (thread-safe)."""

    def __init__(self) -> None:
        self.counts: dict[tuple[str, str, str], int] = {}
        self._lock = threading.Lock()

    def add(self, alias: str, kind: str, outcome: str) -> None:
        key = (alias, kind, outcome)
        with self._lock:
            self.counts[key] = self.counts.get(key, 0) + 1

    def snapshot(self) -> list[tuple[tuple[str, str, str], int]]:
        with self._lock:
            return sorted(self.counts.items())

    def reset(self) -> None:
        """Forget everything (tests)."""
        with self._lock:
            self.counts.clear()


#: The acquisitions of this process.
acquisitions = Acquisitions()


@receiver(lock_acquired, dispatch_uid="django_redislock.metrics.acquisitions.granted")
def _on_granted(*, alias: str, **kwargs: Any) -> None:
    acquisitions.add(alias, str(kwargs.get("kind") or "mutex"), "granted")


@receiver(lock_not_acquired, dispatch_uid="django_redislock.metrics.acquisitions.refused")
def _on_refused(*, alias: str, kind: str, blocking: bool, **kwargs: Any) -> None:
    acquisitions.add(alias, kind, "timeout" if blocking else "busy")


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
