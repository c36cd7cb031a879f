"""Sold-out refusals, counted where they are seen: in each process, flushed every few seconds.

The take script answers "sold out" from one read and writes nothing (docs/guarantees.md), and
a process that remembers a stock sold out refuses from memory with no Redis call at all
(:mod:`.sold_out`): neither path can count in Redis without costing what it exists to save.
So the client counts them, per stock bucket, in two counters: refused by Redis (the take
script, or the one-``GET`` probe of a process that saw the stock sold out) and refused from
the local flag. A daemon thread, started at the first count, adds them to the bucket's meta
hash (``refused_sold_out_redis``, ``refused_sold_out_local``) every :data:`EVERY` seconds, one
pipeline of ``stock_count`` scripts per backend (one round trip per master on a Cluster), and
``atexit`` flushes what is left. A count costs the hot path a dict lookup and one ``next()``
of an ``itertools.count`` (atomic under the GIL; no lock).

What can be lost or late:

* the counts are at most :data:`EVERY` seconds late in Redis (plus the flush's round trip);
* a process that dies without ``atexit`` (SIGKILL, ``os._exit``, a crash) loses its counts of
  its last :data:`EVERY` seconds;
* a flush that fails keeps its counts for the next one (logged at warning once per outage);
  one whose reply was lost after Redis ran it is counted again by the next (a counter for
  watching a sale, not its books);
* at most :data:`MAX_BUCKETS` buckets are counted at once: refusals of further buckets are
  not counted (logged at warning once) until a flush forgets the buckets it wrote (it does
  once the table is half full);
* a bucket cleared before the flush drops its counts (the script counts only in a stock that
  exists, so it never leaves a meta hash behind).

A forked child starts with no counts and no thread (``os.register_at_fork``); its first count
starts its own.
"""

from __future__ import annotations

import atexit
import itertools
import logging
import os
import threading
from typing import TYPE_CHECKING, Any

from ..calls.batch import run_batch

if TYPE_CHECKING:
    from ..backends.redis import RedisQueueBackend

logger = logging.getLogger("django_redislock.inventory")

#: Seconds between two flushes of this process's counts (the most they are late in Redis).
EVERY = 5.0
#: False: no timed flush, only :meth:`SoldOutCounts.flush` and ``atexit`` (the test suite
#: flushes by hand, so that no flush lands in another test's command statistics).
TIMER = True
#: Most buckets with counts waiting for a flush (then further buckets' counts are dropped).
MAX_BUCKETS = 10_000
#: The meta hash fields the counts go to (``StockStats.refused["sold_out_redis"]``, ...).
FIELDS = ("refused_sold_out_redis", "refused_sold_out_local")
#: The flush script.
SCRIPT = "stock_count"


class Pending:
    """One bucket's counters in this process (kept from one flush to the next).

    A refusal is one ``next()`` of an ``itertools.count``: atomic under the GIL (no lock on
    the hot path, where a lock cost about as much as the rest of a local refusal's
    bookkeeping). Only the flushing thread reads them (a ``next()`` too, whose own step it
    subtracts) and keeps what it already wrote: a failed flush writes nothing, so its counts
    are simply still there for the next one.
    """

    __slots__ = ("backend", "local", "meta", "read", "redis", "units", "written")

    def __init__(self, backend: RedisQueueBackend, units: str, meta: str) -> None:
        self.backend = backend
        self.units = units
        self.meta = meta
        self.redis = itertools.count()
        self.local = itertools.count()
        #: the flusher's own ``next()`` calls on each counter so far
        self.read = 0
        #: (by Redis, local) already in the meta hash
        self.written = (0, 0)

    def totals(self) -> tuple[int, int]:
        """(by Redis, local) counted so far (the flusher's side: one reader at a time)."""
        redis, local = next(self.redis) - self.read, next(self.local) - self.read
        self.read += 1
        return redis, local


class SoldOutCounts:
    """This process's sold-out refusals per bucket, and the thread that flushes them."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """No counts and no thread (a new process, or a forked child)."""
        self.lock = threading.Lock()
        #: one flush at a time (the thread's, ``atexit``'s, a caller's)
        self.flushing = threading.Lock()
        self.wake = threading.Event()
        self.entries: dict[tuple[int, str], Pending] = {}
        self.thread: threading.Thread | None = None
        self.pid = os.getpid()
        #: True from a failed flush to the next one that succeeds (one warning per outage)
        self.failing = False
        #: refusals not counted because :data:`MAX_BUCKETS` buckets were kept
        self.dropped = 0

    # -- the hot path -------------------------------------------------------------------------

    def count(self, backend: RedisQueueBackend, own: list[str], local: bool) -> None:
        """One sold-out refusal of the bucket whose keys are ``own`` (units, meta, ...)."""
        entry = self.entries.get((id(backend), own[1]))
        if entry is None:
            entry = self._add(backend, own)
            if entry is None:
                return
        next(entry.local if local else entry.redis)

    def _add(self, backend: RedisQueueBackend, own: list[str]) -> Pending | None:
        key = (id(backend), own[1])
        with self.lock:
            entry = self.entries.get(key)
            if entry is not None:
                return entry
            if len(self.entries) >= MAX_BUCKETS:
                if not self.dropped:
                    logger.warning(
                        "sold-out refusals of more than %d stock buckets are waiting for "
                        "Redis: further buckets are not counted until a flush succeeds",
                        MAX_BUCKETS,
                    )
                self.dropped += 1
                return None
            entry = self.entries[key] = Pending(backend, own[0], own[1])
            if self.thread is None:
                self.thread = threading.Thread(target=self._run, name="redislock-sold-out-counts")
                self.thread.daemon = True
                self.thread.start()
            return entry

    def pending(self) -> dict[tuple[int, str], tuple[int, int]]:
        """(by Redis, local) not yet written, per (backend id, meta key) (tests, debugging)."""
        with self.flushing:
            found = {}
            for key, entry in list(self.entries.items()):
                redis, local = entry.totals()
                if (redis, local) != entry.written:
                    found[key] = (redis - entry.written[0], local - entry.written[1])
            return found

    # -- the thread's side --------------------------------------------------------------------

    def _run(self) -> None:
        pid = self.pid
        wake = self.wake
        while True:
            woken = wake.wait(EVERY if TIMER else None)
            wake.clear()
            if pid != os.getpid() or self.pid != pid:
                return  # a forked child's copy, or a reset: the new state has its own thread
            if not (TIMER or woken):
                continue  # the timer was turned off while this wait ran
            try:
                self.flush()
            except Exception:  # never let the thread die: the counts stay for the next one
                logger.exception("flushing sold-out refusal counts failed")

    def flush(self, *, last: bool = False) -> bool:
        """Add the counts not yet written to the buckets' meta hashes; False if some failed.

        One pipeline per backend. What a failed pipeline (or a bucket's failed script) did
        not write stays counted for the next flush; at exit (``last``) it is lost, and the
        warning says so.
        """
        with self.flushing:
            by_backend: dict[int, list[tuple[Pending, tuple[int, int]]]] = {}
            for entry in list(self.entries.values()):
                totals = entry.totals()
                if totals != entry.written:
                    by_backend.setdefault(id(entry.backend), []).append((entry, totals))
            failed = 0
            error: BaseException | None = None
            for batch in by_backend.values():
                backend = batch[0][0].backend
                calls: list[Any] = [
                    (
                        SCRIPT,
                        [entry.units, entry.meta],
                        [totals[0] - entry.written[0], totals[1] - entry.written[1]],
                    )
                    for entry, totals in batch
                ]
                try:
                    with backend.errors():
                        results = run_batch(backend.client, calls)
                except Exception as exc:  # unreachable, a timeout, a cluster moving: kept
                    failed, error = failed + len(batch), exc
                    continue
                for (entry, totals), result in zip(batch, results, strict=True):
                    if isinstance(result, Exception):
                        failed, error = failed + 1, result
                    else:
                        entry.written = totals
            self._said(failed, error, last)
            if len(self.entries) >= MAX_BUCKETS // 2:
                self._prune()
            return not failed

    def _said(self, failed: int, error: BaseException | None, last: bool) -> None:
        if not failed:
            if self.failing:
                logger.info("sold-out refusal counts reach Redis again")
            self.failing = False
            return
        if last:
            logger.warning(
                "sold-out refusal counts of %d stock bucket(s) were lost at exit (%s)",
                failed,
                error,
            )
        elif not self.failing:
            logger.warning(
                "sold-out refusal counts of %d stock bucket(s) could not be written (%s); "
                "they are kept for the next flush",
                failed,
                error,
            )
        self.failing = True

    def _prune(self) -> None:
        """Forget the buckets with nothing left to write (a table of many sales stays small;
        a refusal counted in the instant its bucket is forgotten is lost)."""
        with self.lock:
            for key, entry in list(self.entries.items()):
                totals = (next(entry.redis) - entry.read, next(entry.local) - entry.read)
                entry.read += 1
                if totals == entry.written:
                    del self.entries[key]
            self.dropped = 0

    def at_exit(self) -> None:
        """Flush what is left (best effort: an interpreter exiting waits for no outage)."""
        if self.pid != os.getpid() or not self.entries:
            return
        try:
            self.flush(last=True)
        except Exception:  # exiting: nothing more to do
            logger.debug("the last sold-out refusal counts were not written", exc_info=True)

    def discard(self) -> None:
        """Forget every count (after any flush under way): tests start from none."""
        with self.flushing, self.lock:
            self.entries = {}
            self.failing = False
            self.dropped = 0


#: This process's counts.
counts = SoldOutCounts()

atexit.register(counts.at_exit)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=counts.reset)
