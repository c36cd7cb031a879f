"""Lock wait and hold time histograms, kept in this process from the lock signals.

Each process counts the locks it takes itself: a receiver of ``lock_acquired``
adds the seconds spent in ``acquire()`` (the signal's ``waited``) to the wait
histogram and remembers when the hold began; a receiver of ``lock_released``
adds the hold time. The endpoint exports the histograms of the process that
serves the scrape, so scrape every web and worker process (or accept that one
process stands for its peers); Prometheus sums them with ``sum by (le)``.

Keeping them in memory costs a dict operation and a bisect per lock event and
no Redis round trip; they are labelled by alias only, because lock names are
unbounded (an ``order:{id}`` lock would create a series per order).

They are counted here rather than in a ``prometheus_client.Histogram`` because
the JSON endpoint exports them too and must work without the ``prometheus``
extra; the text endpoint hands them to ``HistogramMetricFamily`` (see
:mod:`.prometheus`).
"""

from __future__ import annotations

import bisect
import threading
import time
from collections import OrderedDict
from typing import Any

from django.dispatch import receiver

from ..signals import lock_acquired, lock_lost, lock_released

#: Upper bounds in seconds: from a round trip on loopback to a long batch job.
BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
#: Most hold start times remembered (holds that never report a release are forgotten).
MAX_OPEN_HOLDS = 10_000


class Histogram:
    """A cumulative-bucket histogram (thread-safe)."""

    def __init__(self, buckets: tuple[float, ...] = BUCKETS) -> None:
        self.bounds = buckets
        self.counts = [0] * len(buckets)
        self.total = 0.0
        self.count = 0
        self._lock = threading.Lock()

    def observe(self, seconds: float) -> None:
        """Count one observation."""
        index = bisect.bisect_left(self.bounds, seconds)
        with self._lock:
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


class LockTimings:
    """Wait and hold histograms per lock alias for this process."""

    def __init__(self) -> None:
        self.wait: dict[str, Histogram] = {}
        self.hold: dict[str, Histogram] = {}
        self._open: OrderedDict[tuple[str, str, int], float] = OrderedDict()
        self._lock = threading.Lock()

    def _histogram(self, table: dict[str, Histogram], alias: str) -> Histogram:
        found = table.get(alias)
        if found is None:
            with self._lock:
                found = table.setdefault(alias, Histogram())
        return found

    def acquired(self, alias: str, name: str, fence: int, waited: float | None) -> None:
        """A hold began (re-entries of a reentrant hold keep the first start time)."""
        if waited is not None:
            self._histogram(self.wait, alias).observe(max(0.0, waited))
        key = (alias, name, fence)
        with self._lock:
            if key not in self._open:
                self._open[key] = time.monotonic()
                while len(self._open) > MAX_OPEN_HOLDS:
                    self._open.popitem(last=False)

    def released(self, alias: str, name: str, fence: int | None) -> None:
        """A hold ended with a release: observe its length if this process saw it begin."""
        with self._lock:
            started = self._open.pop((alias, name, fence or 0), None)
        if started is not None:
            self._histogram(self.hold, alias).observe(time.monotonic() - started)

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


#: The timings of this process.
timings = LockTimings()


@receiver(lock_acquired, dispatch_uid="django_redislock.metrics.acquired")
def _on_acquired(*, alias: str, name: str, fence: int, **kwargs: Any) -> None:
    timings.acquired(alias, name, fence, kwargs.get("waited"))


@receiver(lock_released, dispatch_uid="django_redislock.metrics.released")
def _on_released(*, alias: str, name: str, **kwargs: Any) -> None:
    timings.released(alias, name, kwargs.get("fence"))


@receiver(lock_lost, dispatch_uid="django_redislock.metrics.lost")
def _on_lost(*, alias: str, name: str, **kwargs: Any) -> None:
    timings.lost(alias, name, kwargs.get("fence"))
