"""The drain loop behind ``manage.py drain_queue``: claim, run, ack or retry.

One round trip per claim in the steady state: the claim script also acks the
previous claim's finished tasks. Idle workers block on each queue's signal list
(``BLPOP``) until a task is enqueued or the next delayed task or lease deadline
comes up, so an idle worker sends a command every few seconds at most.

Pools (``pool=``): ``solo`` (the default) claims ``batch`` tasks and runs them one
by one in this thread; ``thread`` (:mod:`.pool_thread`) and ``async``
(:mod:`.pool_async`) keep ``concurrency`` runs going and claim only as many tasks
as they have free slots, so no task waits claimed but unstarted. What happens
after a run (ack, retry, dead letter, counters) is :mod:`.outcomes`; time limits
are :mod:`.limits`.

Attempts: tasks are claimed without charging an attempt (``claim(start=False)``).
A run is recorded as started, which counts one attempt, by its ``retry`` when it
fails, by the lease keeper a third of a lease into it, or before it runs (one
round trip) when the task is a suspect (its previous lease expired: its worker
may have died running it) or has its own ``max_attempts`` or ``lease``. So a
worker's death charges nothing to its unstarted tasks; they come back as
suspects, and a task that kills its worker is charged from its next run.

Claims: every claimed task carries its claim token. When Redis answers that a
claim is no longer current (a lease renewal or a start returns False), the
worker starts no further task of that claim: another worker may be running them.

Redis outages (:mod:`.outages`): a connection error does not end the worker. It logs the outage
once, retries with capped exponential backoff and jitter, abandons what it could
not record (those leases expire and the tasks come back), resends a claim whose
answer it lost with its request key (so it runs what that claim took), keeps the acks
it could not send, and goes on once Redis answers; only an outage longer than ``give_up``
seconds (``OPTIONS['WORKER_GIVE_UP']``) raises :class:`WorkerGaveUp`.

Stopping (SIGTERM/SIGINT or :meth:`Worker.stop`): running tasks finish, finished
tasks are acked, and claimed tasks that did not start are given back at once
(``release``) instead of waiting for their lease. A second signal stops at once
(:class:`ForcedStop`, raised in the main thread); the unstarted tasks are given back
then too.
Whatever a run raises (``SystemExit`` too) is its task's failure, never a stop (:mod:`.runs`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

from .control import Control
from .database import close_old_connections, note_open_connections
from .fnstats import Tally
from .heartbeat import register
from .idle import IdleWait
from .keeper import LeaseKeeper
from .limits import LimitWatch, Run
from .outages import Outage
from .outcomes import ACK_INTERVAL, COUNTER_INTERVAL, Summary
from .pools import POOLS, check_pool, claim_lease, default_concurrency
from .queue import Queue
from .records import Call, Claim, Task
from .runlog import Success
from .runs import EXIT_HUNG
from .stats import counters_key
from .stops import OUTAGES, ForcedStop, Interrupted, WorkerGaveUp

__all__ = [
    "ACK_INTERVAL",
    "COUNTER_INTERVAL",
    "EXIT_HUNG",
    "POOLS",
    "ForcedStop",
    "Summary",
    "Worker",
    "WorkerGaveUp",
    "check_pool",
    "counters_key",
]

logger = logging.getLogger("django_redislock.worker")


def wake_only(signum: int, frame: FrameType | None) -> None:
    """The ``SIGALRM`` handler of a worker: the signal only cuts a blocking call short."""


class Worker(IdleWait):
    """Drains one or more queues of one alias in this process.

    ``batch`` tasks are claimed per round trip (``solo``; the pools claim at most
    their free slots); ``burst`` returns as soon as nothing is due; ``max_tasks``
    and ``timeout`` (seconds) bound the run. ``progress(summary)`` is called after
    every task. ``pool`` is ``solo``, ``thread`` or ``async``, with ``concurrency``
    runs at once (default: the alias's ``WORKER_POOL`` and ``WORKER_CONCURRENCY``).
    """

    def __init__(
        self,
        queues: list[Queue],
        *,
        batch: int = 100,
        burst: bool = False,
        max_tasks: int | None = None,
        timeout: float | None = None,
        lease: float | None = None,
        progress: Callable[[Summary], None] | None = None,
        give_up: float | None = None,
        pool: str | None = None,
        concurrency: int | None = None,
    ) -> None:
        self.queues = queues
        self.backend = queues[0].backend
        options = self.backend.options
        self.pool: str = options.get("WORKER_POOL", "solo") if pool is None else pool
        if concurrency is None and self.pool != "solo":
            concurrency = options.get("WORKER_CONCURRENCY")
        self.concurrency: int = (
            default_concurrency(self.pool) if concurrency is None else concurrency
        )
        check_pool(self.pool, self.concurrency)
        self.batch = batch
        self.burst = burst
        self.max_tasks = max_tasks
        self.timeout = timeout
        self.lease = lease
        self.progress = progress
        self.summary = Summary()
        self._stopping = False
        #: an operator's "quiet" (see .heartbeat): claim nothing, let running tasks finish
        self.quiet = False
        self._waiting = False
        self._timed_wait = False
        self.give_up = float(options.get("WORKER_GIVE_UP", 300.0) if give_up is None else give_up)
        self._lock = threading.RLock()
        self._acks: dict[str, list[Task]] = {q.name: [] for q in queues}
        self._last_ack = time.monotonic()
        lease_s = float(options["VISIBILITY_TIMEOUT"] if lease is None else lease)
        self._ack_every = ACK_INTERVAL if self.pool == "solo" else min(ACK_INTERVAL, lease_s / 3)
        self._hints: dict[str, Claim] = {}
        self._keeper = LeaseKeeper(self._on_cancel)
        self._limits = LimitWatch(self._on_hung)
        self._rest: tuple[list[Task], int] = ([], 0)
        self._counts: dict[str, Counter[str]] = {q.name: Counter() for q in queues}
        #: failures by exception type and the runs that end a task's history (see .outcomes)
        self._types: dict[str, Counter[str]] = {q.name: Counter() for q in queues}
        #: successful runs for the run log (see .runlog)
        self._runs: dict[str, list[Success]] = {q.name: [] for q in queues}
        #: runs per task function (see .fnstats)
        self._fns: dict[str, dict[str, Tally]] = {q.name: {} for q in queues}
        self._last_counted = time.monotonic()
        self._claim_lost = False
        self._outage = Outage(self.give_up)
        self._forced = False
        self._stop_raised: BaseException | None = None
        self._hung: list[Run] = []
        #: the running tasks: (queue, id) -> when each started (epoch, monotonic)
        self._current: dict[tuple[str, str], tuple[float, float]] = {}
        self._live: dict[tuple[str, str], Task] = {}
        self._controls: dict[tuple[str, str], Control] = {}
        #: per queue, a claim whose answer was lost: resent before any other claim of it
        self._unanswered: dict[str, Call[Claim]] = {}
        self._ready: dict[str, Claim] = {}  # see .idle: the claims idle waits brought back
        self._picked: dict[str, Call[Claim]] = {}
        self._executor: Any = None if self.pool == "solo" else self._make_pool()

    def _make_pool(self) -> Any:
        """The executor of a ``thread`` or ``async`` worker (imported here: solo needs neither)."""
        if self.pool == "async":
            from .pool_async import AsyncPool

            return AsyncPool(self)
        from .pool_thread import ThreadPool

        return ThreadPool(self)

    @property
    def current(self) -> dict[str, float]:
        """The running tasks: id -> start (seconds since the epoch), a copy."""
        with self._lock:
            return {task_id: started for (_, task_id), (started, _) in self._current.items()}

    def running(self) -> list[tuple[str, str, float]]:
        """The running tasks as ``(queue, id, start)``, oldest first (start: monotonic clock)."""
        with self._lock:
            found = [
                (queue, task_id, since) for (queue, task_id), (_, since) in self._current.items()
            ]
        return sorted(found, key=lambda run: run[2])

    # -- control --------------------------------------------------------------------------

    def stop(self) -> None:
        """Finish the running tasks, give the unstarted ones back, and return from :meth:`run`."""
        self._stopping = True

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        if self._stopping and not self._forced:
            self._forced = True
            # this very instance is the worker's own: a task that raises a ForcedStop of
            # its own is failed like any task (see Runs._own)
            self._stop_raised = ForcedStop(
                f"stopped at once by a second {signal.Signals(signum).name}"
            )
            raise self._stop_raised
        self.stop()
        if self._waiting:
            raise Interrupted

    @contextlib.contextmanager
    def signal_handlers(self) -> Iterator[None]:
        """Route SIGTERM and SIGINT to :meth:`stop` while running (main thread only).

        A ``SIGALRM`` with no handler of its own gets one that does nothing: a cancel of a
        solo run sends it to interrupt a blocking call (see :mod:`.control`).
        """
        previous = {
            sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGTERM, signal.SIGINT)
        }
        if signal.getsignal(signal.SIGALRM) in (signal.SIG_DFL, None):
            previous[signal.SIGALRM] = signal.signal(signal.SIGALRM, wake_only)
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def _done(self) -> bool:
        if self._stopping:
            return True
        if self.max_tasks is not None and self.summary.processed >= self.max_tasks:
            return True
        return self.timeout is not None and self._elapsed() >= self.timeout

    def _busy(self) -> bool:
        return self._executor is not None and self._executor.running > 0

    def _held_back(self) -> bool:
        """Due tasks that a queue's rate limit holds back: a burst waits for them."""
        return any(claim.held_back for claim in self._hints.values())

    # -- the loop --------------------------------------------------------------------------

    def run(self) -> Summary:
        """Drain until stopped, bounded, or (with ``burst``) out of due tasks."""
        registration = register(self)  # the workers registry (see .heartbeat)
        note_open_connections()  # opened before the worker's modules were imported
        try:
            while not self._done():
                try:
                    if not self._round() and not self._done():
                        if self.burst and not self._busy() and not self._held_back():
                            if not any(self._acks.values()):
                                break
                            # acks not sent yet may admit held tasks of a concurrency
                            # group (docs/queue.md): send them, then look once more
                            self._flush_acks(force=True)
                            continue
                        self._wait()
                    self._flush_counters()
                except OUTAGES as exc:
                    self._sleep(self._outage.next_delay(exc))  # see .outages
                    continue
                self._outage.ended()
            if self._executor is not None:
                self._executor.finish()
        except BaseException as exc:
            if self._executor is not None and not isinstance(exc, OUTAGES):
                self._executor.give_back_unstarted()  # a forced stop too
            raise
        finally:
            registration.stop()
            if self._executor is not None:
                self._executor.close()
            self._keeper.stop()
            self._limits.stop()
            self._give_back_pickups()
            self._last_words()
            self.summary.elapsed = self._elapsed()
        self._raise_if_stopped_by_a_run()
        return self.summary

    def _last_words(self) -> None:
        """Send what is left (acks, counters), unless Redis is still away."""
        try:
            self._flush_acks(force=True)
            self._flush_counters(force=True)
        except OUTAGES as exc:
            logger.warning("could not send the last acks: Redis is unreachable (%s)", exc)

    def _round(self) -> bool:
        """Claim and run (solo) or start (pools) tasks; False when no queue had work."""
        if self._executor is not None:
            return bool(self._executor.round())
        worked = False
        for queue in self.queues:
            if self._done():
                break
            count = self.batch
            if self.max_tasks is not None:
                count = min(count, self.max_tasks - self.summary.processed)
            claim = self._claim(queue, count)
            if claim.tasks:
                worked = True
                self._run_batch(queue, claim)
        return worked

    def _claim(self, queue: Queue, count: int) -> Claim:
        """Claim up to ``count`` tasks of ``queue``, acking its finished ones in the same call.

        A claim whose answer was lost (slower than ``SOCKET_TIMEOUT``, or its connection
        dropped) may have claimed tasks: the next claim of the queue is that same call
        again, request key and all, which answers what the lost one took (those of its
        claims still current) and claims nothing new. Its tasks are run now, not left
        to their lease (and a ``--burst`` worker does not end without them).
        """
        ready = self._ready.pop(queue.name, None)
        if ready is not None and self.quiet and ready.tasks:
            # an idle wait's claim sent before the worker was told to go quiet: given back
            self.summary.released += queue.release(ready.tasks)
            return dataclasses.replace(ready, tasks=[])
        if ready is not None:
            return ready  # the idle wait's claim came back with its wake-up (see .idle)
        call = self._unanswered.pop(queue.name, None)
        acks: list[Task] = []
        if call is None:
            acks = self._take_acks(queue)
            # quiet: a claim of none still acks and recovers expired leases
            call = self._next_claim(queue, 0 if self.quiet else count, acks)
        try:
            claim = queue._run(call)
        except OUTAGES:
            self._unanswered[queue.name] = call  # resent as is (its acks ride along)
            raise
        except BaseException:
            self._keep_acks(queue, acks)  # not sent: keep them for the next try
            raise
        self._last_ack = time.monotonic()
        self._hints[queue.name] = claim
        if self._live and claim.tasks:
            self._adopt(queue, claim)  # a lapsed lease of a run still going here (rare)
        return claim

    # -- solo: one batch, one task at a time -----------------------------------------------

    def _run_batch(self, queue: Queue, claim: Claim) -> None:
        self._claim_lost = False
        self._rest = (claim.tasks, 0)
        try:
            self._run_tasks(queue, claim)
        except OUTAGES:
            raise  # nothing to give back through: the leases end, the tasks come back
        except BaseException:
            self._give_back_rest()  # a forced stop: the unstarted tasks go back at once
            raise
        finally:
            self._keeper.clear()
            close_old_connections()

    def _run_tasks(self, queue: Queue, claim: Claim) -> None:
        lease = claim_lease(claim)
        renewed = time.monotonic()
        for index, task in enumerate(claim.tasks):
            if self._lost_claim(queue):
                return
            if self._done():
                self.summary.released += queue.release(claim.tasks[index:])
                return
            self._flush_acks()
            if lease and time.monotonic() - renewed > lease / 2:
                # a long batch: ack the finished tasks and keep the unstarted ones from being
                # handed out again before their turn
                self._flush_acks(force=True)
                self._claim_lost = not queue.extend_lease(claim.tasks[index:], lease)
                renewed = time.monotonic()
                if self._lost_claim(queue):
                    return
            self._rest = (claim.tasks, index + 1)
            self._execute(queue, task, lease)

    def _lost_claim(self, queue: Queue) -> bool:
        """True when Redis said this batch's claim is gone: start none of its tasks."""
        if self._claim_lost or self._keeper.lost:
            logger.warning(
                "a lease of queue %r was lost; the rest of the batch is left to other workers",
                queue.name,
            )
            return True
        return False
