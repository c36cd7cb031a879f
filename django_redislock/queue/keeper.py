"""Keeps the leases of a worker's batch right while one of its tasks runs.

A worker claims a batch under one lease and runs the tasks one by one, so without help
a task's lease would count from the claim, not from its start, and while one long task
runs the tasks waiting behind it (and finished ones not yet acked) could see their
leases lapse and be handed to another worker. This thread, a third of a lease into
each run, records the running task's start (one attempt, with the task's own
``max_attempts``) and moves its deadline to its start plus its lease (so every run gets
its whole lease), and renews it and the others every third of the lease. A run without
a hard time limit is renewed for as long as it runs in this process (a run's lease has to
outlast its worker, not the run: only a worker that died lets it lapse); one with a hard
limit up to that limit plus a grace (:func:`~.limits.keep_for`), and a run the worker
could not end (:meth:`LeaseKeeper.hold`) for as long as this process lives. Whether a
pool still makes progress is the heartbeat's business (:mod:`.heartbeat`).

The ``thread`` and ``async`` pools watch every running task at once (one
:class:`Watch` each); the ``solo`` loop watches its one running task.

Every renewal of a running task also says whether it was cancelled (:meth:`Queue.cancel
<django_redislock.queue.Queue.cancel>`): the keeper then calls its ``on_cancel`` callback,
which stops the run (:mod:`.control`), so a cancel costs the worker no call of its own.

When Redis answers that a claim is no longer current (its lease expired and the task
went to another worker, or a newer copy replaced it), :attr:`LeaseKeeper.lost` is set:
the worker then starts no further task of that claim. A failing connection is logged
once per outage; the thread tries again after a delay that doubles from 0.1 s (with
jitter) up to a third of the lease, so it never waits past a renewal it needs.
"""

from __future__ import annotations

import logging
import math
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
    """One daemon thread per worker; :meth:`watch` each run, :meth:`unwatch` it, :meth:`stop`."""

    def __init__(self, on_cancel: Callable[[Watch], None] | None = None) -> None:
        #: called (from this thread) when a renewal answers that a watched run was cancelled
        self.on_cancel = on_cancel
        self._watches: dict[int, Watch] = {}
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
    ) -> Watch:
        """``current`` starts now and may run ``run_for`` s; keep ``tasks()`` leased meanwhile."""
        now = time.monotonic()
        watch = Watch(queue, current, tasks, lease, now + run_for, now, max_attempts)
        self._watches[id(watch)] = watch
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="redislock-leases", daemon=True)
            self._thread.start()
        return watch

    def unwatch(self, watch: Watch | None) -> None:
        """The run of ``watch`` ended: stop renewing it."""
        if watch is not None:
            self._watches.pop(id(watch), None)

    @staticmethod
    def hold(watch: Watch) -> None:
        """Renew ``watch``'s run for as long as this process lives (a run that cannot be ended)."""
        watch.until = math.inf

    def clear_watches(self) -> None:
        """Stop renewing every run (keeps :attr:`lost`)."""
        self._watches.clear()

    def clear(self) -> None:
        """Nothing to keep alive (between batches)."""
        self._watches.clear()
        self.lost = False

    def stop(self) -> None:
        """End the thread (the worker is returning)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
            self._thread = None

    def _run(self) -> None:
        while not self._stop.wait(self._interval()):
            for watch in list(self._watches.values()):
                now = time.monotonic()
                if now >= watch.until:
                    continue
                if now - watch.renewed >= watch.lease / 3 and now >= self._next_try:
                    self._renew(watch)

    def _interval(self) -> float:
        leases = [watch.lease for watch in list(self._watches.values())]
        return 0.5 if not leases else min(max(min(leases) / 6, 0.01), 0.5)

    def _renew(self, watch: Watch) -> None:
        started = time.monotonic()
        try:
            held = True
            tasks = watch.tasks()
            if not watch.current_set:
                run_for = watch.lease if math.isinf(watch.until) else watch.until - started
                held = watch.queue.start(watch.current, max(run_for, 0.001), watch.max_attempts)
                watch.current_set = True
            else:  # the run itself too: its renewal is how a cancel of it is learnt
                tasks = [watch.current, *tasks]
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
        if not held and id(watch) in self._watches:
            self.lost = True
        if watch.current.cancel_requested and self.on_cancel is not None:
            try:
                self.on_cancel(watch)
            except Exception as exc:  # this thread keeps the leases: it must outlive a cancel
                logger.error("could not cancel task %s: %s", watch.current.id, exc, exc_info=exc)
