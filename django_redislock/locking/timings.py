"""What this process's lock calls count for the metrics: wait and hold times, acquire outcomes.

The lock code calls :func:`granted`, :func:`not_granted`, :func:`released` and
:func:`lost` directly, beside the signals of the same names; :mod:`django_redislock.metrics`
reads :data:`timings` and :data:`acquisitions` when it is scraped. They were receivers of
those signals: two signal dispatches a lock cycle, about 5 µs of a 250 µs cycle on loopback
(a tenth of what the library may add to a bare ``SET NX`` and compare-and-delete), for a
dict operation and a bisect. The signals are still sent, for the project's own receivers,
and cost next to nothing without one.

Each process counts the locks it takes itself: the wait histogram gets the seconds spent in
``acquire()``, the hold histogram the time from the grant to its release. They are labelled
by alias only, because lock names are unbounded (an ``order:{id}`` lock would create a
series per order); acquisitions by alias, kind and outcome (``granted``; ``timeout`` when
a waiting acquire's wait ran out; ``busy`` when a try that does not wait found it taken).
"""

from __future__ import annotations

import bisect
import threading
import time
from collections import OrderedDict

#: Upper bounds in seconds: from a round trip on loopback to a long batch job.
BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
#: Most hold start times remembered (holds that never report a release are forgotten).
MAX_OPEN_HOLDS = 10_000


class Histogram:
    """A cumulative-bucket histogram (thread-safe).

    ``lock`` guards its counts: the lock timings give their histograms the lock of their
    open holds and acquire counts, so that a grant updates all three under one lock
    instead of three (see :meth:`LockTimings.acquired`).
    """

    def __init__(
        self, buckets: tuple[float, ...] = BUCKETS, lock: threading.Lock | None = None
    ) -> None:
        self.bounds = buckets
        self.counts = [0] * len(buckets)
        self.total = 0.0
        self.count = 0
        self._lock = threading.Lock() if lock is None else lock

    def observe(self, seconds: float) -> None:
        """Count one observation."""
        with self._lock:
            self._add(seconds)

    def _add(self, seconds: float) -> None:
        """Count one observation; the caller holds the histogram's lock."""
        index = bisect.bisect_left(self.bounds, seconds)
        if index < len(self.counts):
            self.counts[index] += 1
        self.total += seconds
        self.count += 1

    def snapshot(self) -> tuple[list[tuple[float, int]], float, int]:
        """Cumulative ``(bound, count)`` pairs, the sum and the count, read consistently."""
        with self._lock:
            counts, total, count = list(self.counts), self.total, self.count
        cumulative, running = [], 0
        for bound, value in zip(self.bounds, counts, strict=True):
            running += value
            cumulative.append((bound, running))
        return cumulative, total, count


class Acquisitions:
    """Acquire outcomes per ``(alias, kind, outcome)`` in this process (thread-safe)."""

    def __init__(self, lock: threading.Lock | None = None) -> None:
        self.counts: dict[tuple[str, str, str], int] = {}
        self._lock = threading.Lock() if lock is None else lock

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


class LockTimings:
    """Wait and hold histograms per lock alias for this process.

    Its histograms and the open holds share one lock (and so do the process's
    :data:`acquisitions`): a lock cycle takes it twice, once at the grant and once at the
    release.
    """

    def __init__(self, acquisitions: Acquisitions | None = None) -> None:
        self.wait: dict[str, Histogram] = {}
        self.hold: dict[str, Histogram] = {}
        self._open: OrderedDict[tuple[str, str, int], float] = OrderedDict()
        #: where :meth:`acquired` counts grants (it shares their lock)
        self.acquisitions = Acquisitions() if acquisitions is None else acquisitions
        self._lock = self.acquisitions._lock

    def _histogram(self, table: dict[str, Histogram], alias: str) -> Histogram:
        found = table.get(alias)
        if found is None:
            with self._lock:
                found = table.setdefault(alias, Histogram(lock=self._lock))
        return found

    def acquired(
        self, alias: str, name: str, fence: int, waited: float | None, kind: str | None = None
    ) -> None:
        """A hold began (re-entries of a reentrant hold keep the first start time).

        With ``kind``, the grant is counted in :attr:`acquisitions` too, under the same lock.
        """
        wait = self.wait.get(alias) or self._histogram(self.wait, alias)
        key = (alias, name, fence)
        now = time.monotonic()
        opened = self._open
        with self._lock:
            if waited is not None:
                wait._add(max(0.0, waited))
            if key not in opened:
                opened[key] = now
                if len(opened) > MAX_OPEN_HOLDS:
                    while len(opened) > MAX_OPEN_HOLDS:
                        opened.popitem(last=False)
            if kind is not None:
                counts = self.acquisitions.counts
                counted = (alias, kind, "granted")
                counts[counted] = counts.get(counted, 0) + 1

    def released(self, alias: str, name: str, fence: int | None) -> None:
        """A hold ended with a release: observe its length if this process saw it begin."""
        hold = self.hold.get(alias) or self._histogram(self.hold, alias)
        now = time.monotonic()
        with self._lock:
            started = self._open.pop((alias, name, fence or 0), None)
            if started is not None:
                hold._add(now - started)

    def lost(self, alias: str, name: str, fence: int | None) -> None:
        """A hold ended without a release: forget its start (it has no hold time)."""
        with self._lock:
            self._open.pop((alias, name, fence or 0), None)

    def reset(self) -> None:
        """Forget everything (tests)."""
        with self._lock:
            self.wait.clear()
            self.hold.clear()
            self._open.clear()


#: The acquisitions of this process.
acquisitions = Acquisitions()
#: The timings of this process (they count its grants in :data:`acquisitions`).
timings = LockTimings(acquisitions)


def granted(alias: str, kind: str, name: str, fence: int, waited: float | None) -> None:
    """An ``acquire()`` returned a grant (a re-entry too)."""
    timings.acquired(alias, name, fence, waited, kind)


def not_granted(alias: str, kind: str, blocking: bool) -> None:
    """An ``acquire()`` returned without a grant: its wait ran out, or a try found it taken."""
    acquisitions.add(alias, kind, "timeout" if blocking else "busy")


def released(alias: str, name: str, fence: int | None) -> None:
    """A hold ended with its release."""
    timings.released(alias, name, fence)


def lost(alias: str, name: str, fence: int | None) -> None:
    """A hold ended without a release."""
    timings.lost(alias, name, fence)
