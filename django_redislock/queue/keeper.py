"""Keeps the leases of a worker's batch right while one of its tasks runs.

A worker claims a batch under one lease and runs the tasks one by one, so without help
a task's lease would count from the claim, not from its start, and while one long task
runs the tasks waiting behind it (and finished ones not yet acked) could see their
leases lapse and be handed to another worker. This thread, a third of a lease into
each run, records the running task's start (one attempt, with the task's own
``max_attempts``) and moves its deadline to its start plus its lease (so every run gets
its whole lease), and renews the others every third of the lease while the running
task is within its lease. Once the running task overstays, it renews nothing, so a hung
worker does not hold its batch forever.

When Redis answers that a claim is no longer current (its lease expired and the task
went to another worker, or a newer copy replaced it), :attr:`LeaseKeeper.lost` is set:
the worker then starts no further task of that claim. A failing connection is logged
once per outage; the thread tries again after a delay that doubles from 0.1 s (with
jitter) up to a third of the lease, so it never waits past a renewal it needs.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from .queue import Queue
from .records import Task

logger = logging.getLogger("django_redislock.queue")


@dataclass
class Watch:
    """What to keep alive: tasks of one queue, their lease, and until when (monotonic)."""

    queue: Queue
    current: Task
    tasks: Callable[[], list[Task]]
    lease: float
    until: float
    renewed: float
    max_attempts: int | None = None
    current_set: bool = False


class LeaseKeeper:
    """One daemon thread per worker; :meth:`watch` before each task, :meth:`stop` at the end."""

    def __init__(self) -> None:
        self._watch: Watch | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._failing = 0  # renewals failed in a row
        self._next_try = 0.0
        #: set when Redis said a watched claim is no longer current; reset by :meth:`clear`
        self.lost = False

    def watch(
        self,
        queue: Queue,
        current: Task,
        tasks: Callable[[], list[Task]],
        lease: float,
        run_for: float,
        *,
        max_attempts: int | None = None,
    ) -> None:
        """``current`` starts now and may run ``run_for`` s; keep ``tasks()`` leased meanwhile."""
        now = time.monotonic()
        self._watch = Watch(queue, current, tasks, lease, now + run_for, now, max_attempts)
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="redislock-leases", daemon=True)
            self._thread.start()

    def clear(self) -> None:
        """Nothing to keep alive (between batches)."""
        self._watch = None
        self.lost = False

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
            now = time.monotonic()
            if now - watch.renewed >= watch.lease / 3 and now >= self._next_try:
                self._renew(watch)

    def _interval(self) -> float:
        watch = self._watch
        return 0.5 if watch is None else min(max(watch.lease / 6, 0.01), 0.5)

    def _renew(self, watch: Watch) -> None:
        started = time.monotonic()
        try:
            held = True
            if not watch.current_set:
                run_for = max(watch.until - started, 0.001)
                held = watch.queue.start(watch.current, run_for, watch.max_attempts)
                watch.current_set = True
            tasks = watch.tasks()
            if tasks:
                held = watch.queue.extend_lease(tasks, watch.lease) and held
        except Exception as exc:  # the main thread meets the same outage and rides it out
            if not self._failing:
                logger.warning("could not renew leases of queue %r: %s", watch.queue.name, exc)
            delay = min(0.1 * 2 ** min(self._failing, 20), watch.lease / 3)
            self._next_try = time.monotonic() + delay * random.uniform(0.5, 1.0)
            self._failing += 1
            return
        watch.renewed = started  # only a renewal that reached Redis counts
        if self._failing:
            logger.info("renewing leases of queue %r again", watch.queue.name)
        self._failing = 0
        if not held and self._watch is watch:
            self.lost = True
