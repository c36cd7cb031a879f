"""Keeps the leases of a worker's batch right while one of its tasks runs.

A worker claims a batch under one lease and runs the tasks one by one, so without help
a task's lease would count from the claim, not from its start, and while one long task
runs the tasks waiting behind it (and finished ones not yet acked) could see their
leases lapse and be handed to another worker. This thread, a third of a lease into
each run, moves the running task's deadline to its start plus its lease (so every run
gets its whole lease), and renews the others every third of the lease while the running
task is within its lease. Once the running task overstays, it renews nothing, so a hung
worker does not hold its batch forever.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from ..exceptions import RedisLockError
from .queue import Queue

logger = logging.getLogger("django_redislock.queue")


@dataclass
class Watch:
    """What to keep alive: ids of one queue, their lease, and until when (monotonic)."""

    queue: Queue
    current: str
    ids: Callable[[], list[str]]
    lease: float
    until: float
    renewed: float
    current_set: bool = False


class LeaseKeeper:
    """One daemon thread per worker; :meth:`watch` before each task, :meth:`stop` at the end."""

    def __init__(self) -> None:
        self._watch: Watch | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def watch(
        self, queue: Queue, current: str, ids: Callable[[], list[str]], lease: float, run_for: float
    ) -> None:
        """``current`` starts now and may run ``run_for`` s; keep ``ids()`` leased meanwhile."""
        now = time.monotonic()
        self._watch = Watch(queue, current, ids, lease, now + run_for, now)
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="redislock-leases", daemon=True)
            self._thread.start()

    def clear(self) -> None:
        """Nothing to keep alive (between batches)."""
        self._watch = None

    def stop(self) -> None:
        """End the thread (the worker is returning)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
            self._thread = None

    def _run(self) -> None:
        while not self._stop.wait(self._interval()):
            watch = self._watch
            if watch is None or time.monotonic() >= watch.until:
                continue
            if time.monotonic() - watch.renewed >= watch.lease / 3:
                self._renew(watch)

    def _interval(self) -> float:
        watch = self._watch
        return 0.5 if watch is None else min(max(watch.lease / 6, 0.01), 0.5)

    def _renew(self, watch: Watch) -> None:
        watch.renewed = time.monotonic()
        try:
            if not watch.current_set:
                watch.current_set = True
                watch.queue.extend_lease(watch.current, max(watch.until - watch.renewed, 0.001))
            ids = watch.ids()
            if ids:
                watch.queue.extend_lease(ids, watch.lease)
        except RedisLockError as exc:  # the main thread will meet the same error and report it
            logger.warning("could not renew leases of queue %r: %s", watch.queue.name, exc)
