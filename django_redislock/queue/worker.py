"""The drain loop behind ``manage.py drain_queue``: claim in batches, run, ack or retry.

One round trip per batch in the steady state: the claim script also acks the
previous batch's finished tasks. Idle workers block on each queue's signal
list (``BLPOP``) until a task is enqueued or the next delayed task or lease
deadline comes up, so an idle worker sends a command every few seconds at
most instead of polling.

Attempts: a batch is claimed without charging an attempt (``claim(start=False)``).
A run is recorded as started, which counts one attempt, by its ``retry`` when it
fails, by the lease keeper a third of a lease into it, or before it runs (one
round trip) when the task is a suspect (its previous lease expired: its worker
may have died running it) or has its own ``max_attempts`` or ``lease``. So a
worker's death charges nothing to the unstarted tasks of its batch; they come
back as suspects, and a task that kills its worker is charged from its next run.

Claims: every claimed task carries its claim token. When Redis answers that a
claim is no longer current (a lease renewal or a start returns False), the
worker starts no further task of that batch: another worker may be running them.

Redis outages: a connection error does not end the worker. It logs the outage
once, retries with capped exponential backoff and jitter, abandons the rest of
the batch it was running (those leases expire and the tasks come back without a
charge), keeps the acks it could not send, and goes on once Redis answers; only
an outage longer than ``give_up`` seconds (``OPTIONS['WORKER_GIVE_UP']``) raises
:class:`WorkerGaveUp`.

Stopping (SIGTERM/SIGINT or :meth:`Worker.stop`): the running task finishes,
finished tasks are acked, and claimed tasks that did not start are given back
at once (``release``) instead of waiting for their lease. A second signal stops
at once (:class:`ForcedStop`, raised out of the running task).
"""

from __future__ import annotations

import contextlib
import logging
import random
import signal
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

import redis
from django.db import close_old_connections

from .. import signals
from ..exceptions import ConnectionFailed
from .heartbeat import register
from .history import add_to_pipeline as add_runs
from .keeper import LeaseKeeper
from .payloads import HOPELESS, TRANSIENT, Runnable, runnable, task_path
from .queue import Queue
from .rates import add_to_pipeline, type_name
from .records import Claim, Task
from .results import store_failure, store_success
from .throttle import admit
from .validation import MAX_COUNT

logger = logging.getLogger("django_redislock.worker")

#: Longest idle BLPOP; the socket timeout (OPTIONS['SOCKET_TIMEOUT']) must stay above it.
MAX_IDLE_WAIT = 5.0
#: Finished tasks are acked at least this often (seconds) even inside a long batch.
ACK_INTERVAL = 1.0
#: The per-queue outcome counters (for the metrics endpoint) are written at most this often.
COUNTER_INTERVAL = 1.0
#: Reconnect delays: the first, and the cap of the doubling (each with jitter).
RECONNECT_FIRST = 0.1
RECONNECT_MAX = 5.0
#: Errors that mean "Redis is unreachable for now" (a restart, a failover, a partition).
OUTAGES: tuple[type[BaseException], ...] = (
    ConnectionFailed,
    redis.ConnectionError,
    redis.TimeoutError,
    redis.exceptions.ClusterError,
    redis.exceptions.TryAgainError,
    redis.exceptions.ReadOnlyError,
)

logger = logging.getLogger("django_redislock.worker")


def counters_key(queue: Queue) -> str:
    """The hash of a queue's outcome counters (``succeeded``, ``failed``, ``retried``, ``dead``).

    Workers add to it with ``HINCRBY`` at most every :data:`COUNTER_INTERVAL` seconds
    and when they stop, so the counters cost one round trip per second per worker,
    not one per task; a worker killed with SIGKILL loses at most that last second.
    The key shares the queue's hash tag but is not in ``Queue.keys``: a purge keeps it,
    as monotonic counters should survive.
    """
    return queue.backend.key(f"q:{queue.name}", "counters")


class Interrupted(Exception):
    """Raised out of an idle wait by the stop signal handler."""


class ForcedStop(BaseException):
    """A second SIGTERM/SIGINT: raised out of whatever runs, the running task included.

    A BaseException, like KeyboardInterrupt, so a task's ``except Exception`` does
    not swallow it. The interrupted task's claim stays in flight until its lease ends.
    """


class WorkerGaveUp(ConnectionFailed):
    """Redis stayed unreachable for longer than the worker's give-up time."""


@dataclass
class Summary:
    """What a drain did."""

    processed: int = 0
    succeeded: int = 0
    failed: int = 0
    retried: int = 0
    dead: int = 0
    released: int = 0
    started: float = field(default_factory=time.monotonic)
    elapsed: float = 0.0

    def elapsed_now(self) -> float:
        """Seconds since the drain started (for progress lines while it runs)."""
        return time.monotonic() - self.started

    @property
    def rate(self) -> float:
        """Tasks per second."""
        return self.processed / self.elapsed if self.elapsed > 0 else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "processed": self.processed,
            "succeeded": self.succeeded,
            "failed": self.failed,
            "retried": self.retried,
            "dead": self.dead,
            "released": self.released,
            "seconds": round(self.elapsed, 3),
            "tasks_per_second": round(self.rate, 1),
        }


class Worker:
    """Drains one or more queues of one alias in this process.

    ``batch`` tasks are claimed per round trip; ``burst`` returns as soon as
    nothing is due; ``max_tasks`` and ``timeout`` (seconds) bound the run.
    ``progress(summary)`` is called after every task.
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
    ) -> None:
        self.queues = queues
        self.backend = queues[0].backend
        self.batch = batch
        self.burst = burst
        self.max_tasks = max_tasks
        self.timeout = timeout
        self.lease = lease
        self.progress = progress
        self.summary = Summary()
        self._stopping = False
        self._waiting = False
        self.give_up = float(
            self.backend.options.get("WORKER_GIVE_UP", 300.0) if give_up is None else give_up
        )
        self._acks: dict[str, list[Task]] = {q.name: [] for q in queues}
        self._last_ack = time.monotonic()
        self._hints: dict[str, Claim] = {}
        self._keeper = LeaseKeeper()
        self._rest: tuple[list[Task], float] = ([], 0.0)
        self._counts: dict[str, Counter[str]] = {q.name: Counter() for q in queues}
        self._types: dict[str, Counter[str]] = {q.name: Counter() for q in queues}
        self._runs: dict[str, list[tuple[str, int, float]]] = {q.name: [] for q in queues}
        self._last_counted = time.monotonic()
        self._claim_lost = False
        self._outage: float | None = None
        self._outage_retries = 0
        self._forced = False

    # -- control --------------------------------------------------------------------------

    def stop(self) -> None:
        """Finish the running task, give the unstarted ones back, and return from :meth:`run`."""
        self._stopping = True

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        if self._stopping and not self._forced:
            self._forced = True
            raise ForcedStop(f"stopped at once by a second {signal.Signals(signum).name}")
        self.stop()
        if self._waiting:
            raise Interrupted

    @contextlib.contextmanager
    def signal_handlers(self) -> Iterator[None]:
        """Route SIGTERM and SIGINT to :meth:`stop` while running (main thread only)."""
        previous = {
            sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGTERM, signal.SIGINT)
        }
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

    def _elapsed(self) -> float:
        return time.monotonic() - self.summary.started

    # -- the loop --------------------------------------------------------------------------

    def run(self) -> Summary:
        """Drain until stopped, bounded, or (with ``burst``) out of due tasks."""
        registration = register(self)  # the workers registry (see .heartbeat)
        try:
            while not self._done():
                try:
                    if not self._round() and not self._done():
                        if self.burst and not any(c.held_back for c in self._hints.values()):
                            break
                        self._wait()
                    self._flush_counters()
                except OUTAGES as exc:
                    self._ride_out(exc)
                    continue
                self._reconnected()
        finally:
            registration.stop()
            self._keeper.stop()
            self._last_words()
            self.summary.elapsed = self._elapsed()
        return self.summary

    def _last_words(self) -> None:
        """Send what is left (acks, counters), unless Redis is still away."""
        try:
            self._flush_acks(force=True)
            self._flush_counters(force=True)
        except OUTAGES as exc:
            logger.warning("could not send the last acks: Redis is unreachable (%s)", exc)

    def _ride_out(self, exc: BaseException) -> None:
        """Wait before the next try (capped exponential backoff with jitter), or give up."""
        now = time.monotonic()
        if self._outage is None:
            self._outage, self._outage_retries = now, 0
            logger.warning(
                "Redis is unreachable (%s); the worker keeps retrying for up to %gs",
                exc,
                self.give_up,
            )
        elif now - self._outage >= self.give_up:
            raise WorkerGaveUp(
                f"Redis was unreachable for {now - self._outage:.1f}s, longer than the "
                f"worker's give-up time of {self.give_up:g}s (OPTIONS['WORKER_GIVE_UP'] or "
                f"drain_queue --give-up): {exc}"
            ) from exc
        ceiling = min(RECONNECT_MAX, RECONNECT_FIRST * 2**self._outage_retries)
        self._outage_retries = min(self._outage_retries + 1, 30)
        delay = min(ceiling * random.uniform(0.5, 1.0), self._outage + self.give_up - now)
        self._sleep(max(delay, 0.0))

    def _reconnected(self) -> None:
        if self._outage is not None:
            logger.warning("Redis answers again after %.1fs", time.monotonic() - self._outage)
            self._outage = None

    def _sleep(self, seconds: float) -> None:
        """Sleep, cut short by a stop signal."""
        self._waiting = True
        try:
            if not self._stopping:
                time.sleep(seconds)
        except Interrupted:
            pass
        finally:
            self._waiting = False

    def _round(self) -> bool:
        """Claim and run one batch from each queue; False when none had work."""
        worked = False
        for queue in self.queues:
            if self._done():
                break
            count = self.batch
            if self.max_tasks is not None:
                count = min(count, self.max_tasks - self.summary.processed)
            acks = self._take_acks(queue)
            previous = self._hints.get(queue.name)
            done = previous.request if previous is not None and previous.request else None
            try:
                claim = queue.claim(count, self.lease, ack=acks, start=False, done_request=done)
            except BaseException:
                self._acks[queue.name][:0] = acks  # not sent: keep them for the next try
                raise
            self._last_ack = time.monotonic()
            self._hints[queue.name] = claim
            if claim.tasks:
                worked = True
                self._run_batch(queue, claim)
        return worked

    def _run_batch(self, queue: Queue, claim: Claim) -> None:
        self._claim_lost = False
        try:
            self._run_tasks(queue, claim)
        finally:
            self._keeper.clear()
            close_old_connections()

    def _run_tasks(self, queue: Queue, claim: Claim) -> None:
        first = claim.tasks[0].lease_deadline
        lease = (first - claim.now) / 1e6 if first is not None else 0.0
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
            self._rest = (claim.tasks[index + 1 :], lease)
            self._execute(queue, task)

    def _lost_claim(self, queue: Queue) -> bool:
        """True when Redis said this batch's claim is gone: start none of its tasks."""
        if self._claim_lost or self._keeper.lost:
            logger.warning(
                "a lease of queue %r was lost; the rest of the batch is left to other workers",
                queue.name,
            )
            return True
        return False

    def _begin(self, queue: Queue, task: Task, fn: Runnable) -> bool:
        """Record the start of a suspect, or of a task with its own settings, before it runs.

        One round trip for these only: a suspect may be the task that killed its last
        worker, so its neighbours' acks go first and its run is charged now; a task
        with its own ``max_attempts`` or ``lease`` gets them kept with its claim. False
        when the claim is no longer current (the task is not run).
        """
        if not (task.suspect or fn.lease is not None or fn.max_attempts is not None):
            return True
        if task.suspect:
            self._flush_acks(force=True)
        lease = fn.lease if fn.lease is not None else self._rest[1] or None
        if queue.start(task, lease, fn.max_attempts):
            return True
        self._claim_lost = True
        return False

    def _take_acks(self, queue: Queue) -> list[Task]:
        tasks, self._acks[queue.name] = self._acks[queue.name], []
        return tasks

    def _flush_acks(self, force: bool = False) -> None:
        if not force and time.monotonic() - self._last_ack < ACK_INTERVAL:
            return
        for queue in self.queues:
            tasks = self._take_acks(queue)
            if tasks:
                try:
                    queue.ack(tasks)
                except BaseException:
                    self._acks[queue.name][:0] = tasks  # not sent: keep them for the next try
                    raise
        self._last_ack = time.monotonic()

    def _flush_counters(self, force: bool = False) -> None:
        """Add this worker's outcome counts to each queue's counters hash (one pipeline)."""
        if not force and time.monotonic() - self._last_counted < COUNTER_INTERVAL:
            return
        self._last_counted = time.monotonic()
        pending = [(q, self._counts[q.name]) for q in self.queues if self._counts[q.name]]
        if not pending:
            return
        with self.backend.errors():
            pipe = self.backend.client.pipeline(transaction=False)
            for queue, counts in pending:
                key = counters_key(queue)
                for outcome, value in counts.items():
                    pipe.hincrby(key, outcome, value)
                add_to_pipeline(pipe, queue, counts, self._types[queue.name])
                add_runs(pipe, queue, self._runs[queue.name])
            pipe.execute()
        for queue, counts in pending:
            counts.clear()
            self._types[queue.name].clear()
            self._runs[queue.name].clear()

    # -- one task -------------------------------------------------------------------------

    def _execute(self, queue: Queue, task: Task) -> None:
        try:
            fn = runnable(task)
        except TRANSIENT as exc:
            self._postpone(queue, task, exc)
            return
        except HOPELESS as exc:
            self._bury(queue, task, exc)
            return
        # as around a request: one call between two tasks closes what the previous one left
        # unusable and readies the next; _run_batch makes the call after the last task
        close_old_connections()
        if not admit(queue, task, fn):  # given back by its rate limit: no longer ours
            if not self._keeper.lost:
                self._keeper.clear()  # its watch of the task before would renew this one
            return
        if not self._begin(queue, task, fn):
            return
        signals.task_started.send(sender=Queue, queue=queue, task=task)
        self._keep_rest(queue, task, fn)
        verbose = logger.isEnabledFor(logging.INFO)
        began = time.monotonic()
        try:
            result = fn.run(task.payload)
        except Exception as exc:
            self._failed(queue, task, fn, exc, time.monotonic() - began)
        else:
            store_success(queue, task, result)  # store_result tasks only: before the ack
            self._acks[queue.name].append(task)
            if task.last_error:  # it failed before: its history ends with this run
                self._runs[queue.name].append((task.id, task.attempts, time.monotonic() - began))
            self.summary.succeeded += 1
            self._counts[queue.name]["succeeded"] += 1
            if verbose:
                logger.info(
                    "task %s (%s) of %r succeeded in %.3fs",
                    task.id,
                    task_path(task),
                    queue.name,
                    time.monotonic() - began,
                )
            signals.task_succeeded.send(sender=Queue, queue=queue, task=task, result=result)
        finally:
            self._count()

    def _keep_rest(self, queue: Queue, task: Task, fn: Runnable) -> None:
        """Let the keeper give this run its whole lease and keep the rest of the batch leased."""
        rest, lease = self._rest
        if lease > 0:
            self._keeper.watch(
                queue,
                task,
                lambda: rest + self._acks[queue.name],
                lease,
                fn.lease or lease,
                max_attempts=fn.max_attempts,
            )

    def _bury(self, queue: Queue, task: Task, exc: Exception) -> None:
        """Dead-letter a task that can never run here (see :mod:`.payloads`), and keep going."""
        error = f"{type(exc).__name__}: {exc}"
        queue.retry(task, delay=0, error=error, max_attempts=1)
        store_failure(queue, task, exc)
        self.summary.dead += 1
        self._counts[queue.name]["dead"] += 1
        logger.error("task %s of %r failed (dead): %s", task.id, queue.name, error)
        signals.task_dead.send(sender=Queue, queue=queue, task=task, error=exc)
        self._count()

    def _postpone(self, queue: Queue, task: Task, exc: Exception) -> None:
        """Retry a task whose module failed to import, with backoff; the others go on.

        Its attempts are not a limit here: the task is not at fault, and the deploy
        that fixes the module may be hours away, so it waits with the queue's
        backoff (doubling up to ``RETRY_BACKOFF_MAX``) instead of dying after
        ``MAX_ATTEMPTS`` quick tries (only the hard cap of 5,000 attempts ends it).
        """
        error = f"{type(exc).__name__}: {exc}"
        outcome = queue.retry(task, error=error, max_attempts=min(task.attempts + 1, MAX_COUNT))
        level = logging.ERROR if outcome == "dead" else logging.WARNING
        logger.log(level, "task %s of %r failed (%s): %s", task.id, queue.name, outcome, error)
        self._record_failure(queue, task, outcome, exc)
        self._count()

    def _failed(
        self, queue: Queue, task: Task, fn: Runnable, exc: Exception, runtime: float
    ) -> None:
        error = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        detail = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        outcome = queue.retry(
            task,
            delay=queue.backoff(task.attempts, fn.retry_backoff, fn.retry_backoff_max),
            error=f"{error}\n\n{detail[-3000:]}",
            max_attempts=fn.max_attempts,
            runtime=runtime,
        )
        logger.log(
            logging.ERROR if outcome == "dead" else logging.WARNING,
            "task %s (%s) of %r failed (%s)",
            task.id,
            task_path(task),
            queue.name,
            outcome,
            exc_info=exc,
        )
        self._record_failure(queue, task, outcome, exc)

    def _record_failure(self, queue: Queue, task: Task, outcome: str, exc: Exception) -> None:
        """Count a failed run by its outcome ("retried", "dead" or "lost") and signal it."""
        self.summary.failed += 1
        self._counts[queue.name]["failed"] += 1
        self._counts[queue.name][outcome] += 1
        self._types[queue.name][type_name(exc)] += 1
        if outcome == "dead":
            store_failure(queue, task, exc)
            self.summary.dead += 1
            signals.task_dead.send(sender=Queue, queue=queue, task=task, error=exc)
        else:
            self.summary.retried += outcome == "retried"
            signals.task_failed.send(sender=Queue, queue=queue, task=task, error=exc)

    def _count(self) -> None:
        self.summary.processed += 1
        if self.progress is not None:
            self.progress(self.summary)

    # -- idle waiting ------------------------------------------------------------------------

    def _wait(self) -> None:
        """Block until a task is enqueued or something becomes due (never busy-polls)."""
        self._flush_acks(force=True)
        seconds = self._wait_seconds()
        keys = [queue.signal_key for queue in self.queues]
        if self.backend.is_cluster and len(keys) > 1:
            # a BLPOP on a Cluster takes keys of one slot; wait on the queues in turn
            keys = [keys[int(time.monotonic()) % len(keys)]]
            seconds = min(seconds, 1.0)
        self._waiting = True
        try:
            if not self._stopping:
                with self.backend.errors():
                    self.backend.client.blpop(keys, timeout=seconds)
        except Interrupted:
            pass
        finally:
            self._waiting = False

    def _wait_seconds(self) -> float:
        cap = min(MAX_IDLE_WAIT, float(self.backend.options["SOCKET_TIMEOUT"]) - 0.5)
        if self.timeout is not None:
            cap = min(cap, self.timeout - self._elapsed())
        for claim in self._hints.values():
            for moment in (claim.next_work, claim.next_lease_deadline):
                if moment is not None:
                    cap = min(cap, (moment - claim.now) / 1e6)
        return max(cap, 0.01)
