"""Lock wait and hold time histograms, kept in this process by the lock calls.

Each process counts the locks it takes itself: a grant adds the seconds spent in
``acquire()`` to the wait histogram and remembers when the hold began; its release
adds the hold time (recorded by the lock code, :mod:`django_redislock.locking.timings`,
which holds these classes). The endpoint exports the histograms of the process that
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

from ..locking.timings import BUCKETS, MAX_OPEN_HOLDS, Histogram, LockTimings, timings

__all__ = ["BUCKETS", "MAX_OPEN_HOLDS", "Histogram", "LockTimings", "timings"]
