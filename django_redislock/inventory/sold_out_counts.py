"""Sold-out refusals, counted where they are seen: in each process, flushed every few seconds.

The take script answers "sold out" from one read and writes nothing (docs/guarantees.md), and
a process that remembers a stock sold out refuses from memory with no Redis call at all
(:mod:`.sold_out`): neither path can count in Redis without costing what it exists to save.
So the client counts them, per stock bucket, in two counters: refused by Redis (the take
script, or the one-``GET`` probe of a process that saw the stock sold out) and refused from
the local flag. A daemon thread, started at the first count, adds them to the bucket's meta
hash (``refused_sold_out_redis``, ``refused_sold_out_local``) every :data:`EVERY` seconds, one
pipeline of ``stock_count`` scripts per backend (one round trip per master on a Cluster), and
``atexit`` flushes what is left. A count costs the hot path one uncontended lock.

What can be lost or late:

* the counts are at most :data:`EVERY` seconds late in Redis (plus the flush's round trip);
* a process that dies without ``atexit`` (SIGKILL, ``os._exit``, a crash) loses its counts of
  its last :data:`EVERY` seconds;
* a flush that fails keeps its counts for the next one (logged at warning once per outage);
  one whose reply was lost after Redis ran it is counted again by the next (a counter for
  watching a sale, not its books);
* at most :data:`MAX_BUCKETS` buckets are pending at once: counts of further buckets are
  dropped (logged at warning once) until a flush empties the table;
* a bucket cleared before the flush drops its counts (the script counts only in a stock that
  exists, so it never leaves a meta hash behind).

A forked child starts with no counts and no thread (``os.register_at_fork``); its first count
starts its own.
"""

from __future__ import annotations

import atexit
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
    """One bucket's counts not yet in Redis."""

    __slots__ = ("backend", "local", "meta", "redis", "units")

    def __init__(self, backend: RedisQueueBackend, units: str, meta: str) -> None:
        self.backend = backend
        self.units = units
        self.meta = meta
        self.redis = 0
        self.local = 0


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
        self.pending: dict[tuple[int, str], Pending] = {}
        self.thread: threading.Thread | None = None
        self.pid = os.getpid()
        #: True from a failed flush to the next one that succeeds (one warning per outage)
        self.failing = False
        #: counts dropped because :data:`MAX_BUCKETS` buckets were pending
        self.dropped = 0

    # -- the hot path -------------------------------------------------------------------------

    def count(self, backend: RedisQueueBackend, own: list[str], local: bool) -> None:
        """One sold-out refusal of the bucket whose keys are ``own`` (units, meta, ...)."""
        key = (id(backend), own[1])
        with self.lock:
            entry = self.pending.get(key)
            if entry is None:
                if len(self.pending) >= MAX_BUCKETS:
                    self._drop()
                    return
                entry = self.pending[key] = Pending(backend, own[0], own[1])
                if self.thread is None:
                    self._start()
            if local:
                entry.local += 1
            else:
                entry.redis += 1

    def _drop(self) -> None:
        if not self.dropped:
            logger.warning(
                "sold-out refusal counts of more than %d stock buckets are waiting for Redis: "
                "further buckets' counts are dropped until a flush succeeds",
                MAX_BUCKETS,
            )
        self.dropped += 1

    def _start(self) -> None:
        self.thread = threading.Thread(target=self._run, name="redislock-sold-out-counts")
        self.thread.daemon = True
        self.thread.start()

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

    def flush(self) -> bool:
        """Add the pending counts to the buckets' meta hashes; False if some stayed pending.

        One pipeline per backend. The counts of a backend whose pipeline failed (or of a
        bucket whose script failed) go back to the table, added to what came since.
        """
        with self.flushing:
            with self.lock:
                taken, self.pending = self.pending, {}
            by_backend: dict[int, list[Pending]] = {}
            for entry in taken.values():
                by_backend.setdefault(id(entry.backend), []).append(entry)
            failed: list[Pending] = []
            error: BaseException | None = None
            for entries in by_backend.values():
                backend = entries[0].backend
                calls: list[Any] = [
                    (SCRIPT, [entry.units, entry.meta], [entry.redis, entry.local])
                    for entry in entries
                ]
                try:
                    with backend.errors():
                        results = run_batch(backend.client, calls)
                except Exception as exc:  # unreachable, a timeout, a cluster moving: keep them
                    failed += entries
                    error = exc
                    continue
                for entry, result in zip(entries, results, strict=True):
                    if isinstance(result, Exception):
                        failed.append(entry)
                        error = result
            self._kept(failed, error)
            return not failed

    def _kept(self, failed: list[Pending], error: BaseException | None) -> None:
        if not failed:
            if self.failing:
                logger.info("sold-out refusal counts reach Redis again")
            self.failing = False
            self.dropped = 0
            return
        if not self.failing:
            logger.warning(
                "sold-out refusal counts of %d stock bucket(s) could not be written (%s); "
                "they are kept for the next flush",
                len(failed),
                error,
            )
        self.failing = True
        with self.lock:
            for entry in failed:
                key = (id(entry.backend), entry.meta)
                found = self.pending.get(key)
                if found is None:
                    if len(self.pending) >= MAX_BUCKETS:
                        self._drop()
                        continue
                    self.pending[key] = entry
                else:
                    found.redis += entry.redis
                    found.local += entry.local

    def at_exit(self) -> None:
        """Flush what is left (best effort: an interpreter exiting waits for no outage)."""
        if self.pid != os.getpid() or not self.pending:
            return
        try:
            self.flush()
        except Exception:  # exiting: nothing more to do
            logger.debug("the last sold-out refusal counts were not written", exc_info=True)

    def discard(self) -> None:
        """Forget the pending counts (after any flush under way): tests start from none."""
        with self.flushing, self.lock:
            self.pending = {}
            self.failing = False
            self.dropped = 0


#: This process's counts.
counts = SoldOutCounts()

atexit.register(counts.at_exit)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=counts.reset)
