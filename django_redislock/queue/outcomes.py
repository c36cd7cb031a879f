"""What a worker does after a run: ack, retry, bury or postpone it, and count it.

Split from the drain loop (:mod:`.worker`) because every pool shares it: the
``solo`` loop calls it on the main thread, the ``thread`` pool from its worker
threads, the ``async`` pool from its event loop. The bookkeeping (the
:class:`Summary`, the per-queue counters, the acks waiting for the next claim)
is changed under one lock, so threads never lose a count or an ack; the Redis
calls (``retry``) are made outside it.

A failed run is one ``retry`` round trip (backoff, or the dead-letter set after
its attempts); a successful one costs nothing here: its ack waits for the next
claim (or :data:`ACK_INTERVAL`). The acks and counters are sent from here too:
:meth:`Outcomes._flush_acks` and :meth:`Outcomes._flush_counters` (the counters,
rate buckets, per-function tallies and successes of a second in one
:class:`~django_redislock.calls.batch.Batch`, every script call an ``EVALSHA``).
"""

from __future__ import annotations

import logging
import threading
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .. import signals
from ..calls.batch import Batch
from ..exceptions import Retry, TaskExpired
from ..validation import MAX_COUNT
from .fnstats import Tally
from .fnstats import add_to_pipeline as add_functions
from .payloads import Runnable, task_path
from .queue import Queue
from .rates import add_to_pipeline, type_name
from .records import Task
from .results import ResultStatus, store_failure
from .runlog import Success
from .runlog import add_to_pipeline as add_runs
from .stats import counters_key

if TYPE_CHECKING:
    from ..backends.redis import RedisQueueBackend

logger = logging.getLogger("django_redislock.worker")

#: Finished tasks are acked at least this often (seconds) even inside a long batch.
ACK_INTERVAL = 1.0
#: The per-queue outcome counters (for the metrics endpoint) are written at most this often.
COUNTER_INTERVAL = 1.0


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


def retried(fn: Runnable, exc: BaseException) -> bool:
    """Whether a failure with ``exc`` may be retried, by the task's ``retry_on`` and
    ``dont_retry_on`` (a Django tasks-framework call has neither: every failure may)."""
    never = getattr(fn, "dont_retry_on", ())
    if never and isinstance(exc, never):
        return False
    only = getattr(fn, "retry_on", None)
    return only is None or isinstance(exc, only)


def error_text(exc: BaseException) -> str:
    """The one-line error a failed run is recorded with, plus the tail of its traceback."""
    error = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    detail = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return f"{error}\n\n{detail[-3000:]}"


class Outcomes:
    """The after-run half of :class:`~.worker.Worker` (a mixin: it owns no loop)."""

    queues: list[Queue]
    summary: Summary
    progress: Any
    _acks: dict[str, list[Task]]
    _counts: dict[str, Counter[str]]
    _types: dict[str, Counter[str]]
    _runs: dict[str, list[Success]]
    _fns: dict[str, dict[str, Tally]]
    _lock: threading.RLock
    _last_ack: float
    _ack_every: float
    _last_counted: float
    backend: RedisQueueBackend

    def _succeeded(self, queue: Queue, task: Task, result: Any, runtime: float) -> None:
        """Queue the ack for the next claim, count it, and send ``task_succeeded``.

        The run is entered in the queue's run log (:mod:`.runlog`), and a task that failed
        before ends its history (:mod:`.history`) with it, sent with the counters.
        """
        ended = time.monotonic()
        with self._lock:
            self._acks[queue.name].append(task)
            self.summary.succeeded += 1
            self._counts[queue.name]["succeeded"] += 1
            name = self._tally(queue, task, runtime, False)
            self._runs[queue.name].append(
                (task.id, task.attempts, runtime, name, bool(task.last_error), ended)
            )
        if logger.isEnabledFor(logging.INFO):  # spares the task path lookup on the hot path
            logger.info(
                "task %s (%s) of %r succeeded in %.3fs",
                task.id,
                task_path(task),
                queue.name,
                runtime,
            )
        signals.task_succeeded.send(sender=Queue, queue=queue, task=task, result=result)

    def _tally(self, queue: Queue, task: Task, runtime: float | None, failed: bool) -> str:
        """Count a run of the task's function (:mod:`.fnstats`) and return its name; under
        the lock.

        On every run's path: the decoded ``@task`` envelope's name is read directly (about
        0.1 µs), :func:`~.payloads.task_path` only for another payload.
        """
        decoded = task._decoded
        name = decoded.get("task") if decoded.__class__ is dict else None
        if name.__class__ is not str:
            name = task_path(task)
        tallies = self._fns[queue.name]
        tally = tallies.get(name)
        if tally is None:
            tally = tallies[name] = Tally()
        tally.add(runtime, failed)
        return name

    def _retry_args(
        self, queue: Queue, task: Task, fn: Runnable, exc: BaseException, runtime: float
    ) -> Any:
        """The ``retry`` keyword arguments of a failed run (backoff, error, its max_attempts,
        and the seconds it ran, for its history).

        A :class:`~django_redislock.exceptions.Retry` the run raised sets its own countdown
        and retries; a failure ``retry_on`` leaves out (or ``dont_retry_on`` names) is
        dead-lettered at once (``max_attempts`` 1: any attempt is the last).
        """
        delay: float | None = None
        limit = fn.max_attempts
        error = exc
        if isinstance(exc, Retry):
            delay = exc.countdown
            limit = limit if exc.max_retries is None else min(exc.max_retries + 1, MAX_COUNT)
            error = exc if exc.exc is None else exc.exc
        elif not retried(fn, exc):
            limit = 1
        if delay is None:
            jitter = getattr(fn, "retry_jitter", None)
            delay = queue.backoff(task.attempts, fn.retry_backoff, fn.retry_backoff_max, jitter)
        return {
            "delay": delay,
            "error": error_text(error),
            "max_attempts": limit,
            "runtime": runtime,
        }

    def _ended_early(
        self, queue: Queue, task: Task, exc: BaseException, runtime: float | None
    ) -> None:
        """End a task that was cancelled, or that expired before it started (``exc`` is a
        ``TaskExpired``): dead-lettered with ``exc`` as its error, its history showing
        ``cancelled`` or ``expired``, a stored result CANCELLED or FAILED. One round trip
        (two with a stored result).
        """
        final = "expired" if isinstance(exc, TaskExpired) else "cancelled"
        error = f"{type(exc).__name__}: {exc}"
        outcome = queue.retry(task, 0, error, 1, runtime, final=final)
        status = ResultStatus.CANCELLED if final == "cancelled" else ResultStatus.FAILED
        if outcome != "lost":
            store_failure(queue, task, exc, status)
        with self._lock:
            self._counts[queue.name][final] += 1
        logger.warning(
            "task %s (%s) of %r %s: %s", task.id, task_path(task), queue.name, final, exc
        )

    def _failed(
        self, queue: Queue, task: Task, fn: Runnable, exc: BaseException, runtime: float
    ) -> None:
        outcome = queue.retry(task, **self._retry_args(queue, task, fn, exc, runtime))
        self._log_failure(queue, task, outcome, exc, runtime)

    def _log_failure(
        self,
        queue: Queue,
        task: Task,
        outcome: str,
        exc: BaseException,
        runtime: float | None = None,
    ) -> None:
        logger.log(
            logging.ERROR if outcome == "dead" else logging.WARNING,
            "task %s (%s) of %r failed (%s)",
            task.id,
            task_path(task),
            queue.name,
            outcome,
            exc_info=exc,
        )
        self._record_failure(queue, task, outcome, exc, runtime)

    def _bury(self, queue: Queue, task: Task, exc: Exception) -> None:
        """Dead-letter a task that can never run here (see :mod:`.payloads`), and keep going."""
        error = f"{type(exc).__name__}: {exc}"
        queue.retry(task, delay=0, error=error, max_attempts=1)
        store_failure(queue, task, exc)
        with self._lock:
            self.summary.dead += 1
            self._counts[queue.name]["dead"] += 1
            self._tally(queue, task, None, True)
        logger.error("task %s of %r failed (dead): %s", task.id, queue.name, error, exc_info=exc)
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

    def _record_failure(
        self,
        queue: Queue,
        task: Task,
        outcome: str,
        exc: BaseException,
        runtime: float | None = None,
    ) -> None:
        """Count a failed run by its outcome ("retried", "dead" or "lost") and signal it."""
        with self._lock:
            self._tally(queue, task, runtime, True)
            self.summary.failed += 1
            self._counts[queue.name]["failed"] += 1
            self._counts[queue.name][outcome] += 1
            self._types[queue.name][type_name(exc)] += 1
            if outcome == "dead":
                self.summary.dead += 1
            else:
                self.summary.retried += outcome == "retried"
        if outcome == "dead":
            store_failure(queue, task, exc)  # store_result tasks only
            signals.task_dead.send(sender=Queue, queue=queue, task=task, error=exc)
        else:
            signals.task_failed.send(sender=Queue, queue=queue, task=task, error=exc)

    def _take_acks(self, queue: Queue) -> list[Task]:
        with self._lock:
            tasks, self._acks[queue.name] = self._acks[queue.name], []
        return tasks

    def _keep_acks(self, queue: Queue, tasks: list[Task]) -> None:
        with self._lock:
            self._acks[queue.name][:0] = tasks

    def _flush_acks(self, force: bool = False) -> None:
        if not force and time.monotonic() - self._last_ack < self._ack_every:
            return
        for queue in self.queues:
            tasks = self._take_acks(queue)
            if tasks:
                try:
                    queue.ack(tasks)
                except BaseException:
                    self._keep_acks(queue, tasks)  # not sent: keep them for the next try
                    raise
        self._last_ack = time.monotonic()

    def _flush_counters(self, force: bool = False) -> None:
        """Add this worker's outcome counts to each queue's counters hash, its rate buckets
        (:mod:`.rates`), its per-function tallies (:mod:`.fnstats`) and its successful runs
        to the run log (:mod:`.runlog`; the task history too for those that end a run of
        failures), in one batch.

        One pipeline (per master on a Cluster), sent with ``resend="missing"``: after
        ``NOSCRIPT`` only the script calls that did not run are sent again, so no count
        is applied twice. Not sent (a connection error): the counts are kept for the next
        flush. Sent, but the resend after ``NOSCRIPT`` failed, or a call answered with an
        error: the first error is raised and those counts are dropped (what ran stays
        counted; sending it again would count it twice), as a worker killed then loses
        its last second.
        """
        if not force and time.monotonic() - self._last_counted < COUNTER_INTERVAL:
            return
        self._last_counted = time.monotonic()
        with self._lock:
            pending = [
                (
                    q,
                    Counter(self._counts[q.name]),
                    Counter(self._types[q.name]),
                    self._runs[q.name],
                    self._fns[q.name],
                )
                for q in self.queues
                if self._counts[q.name] or self._fns[q.name]
            ]
            for queue, *_ in pending:
                self._counts[queue.name].clear()
                self._types[queue.name].clear()
                self._runs[queue.name] = []
                self._fns[queue.name] = {}
        if not pending:
            return
        batch: Batch | None = None
        try:
            with self.backend.errors():
                batch = Batch(self.backend.client)
                for queue, counts, types, runs, fns in pending:
                    key = counters_key(queue)
                    for outcome, value in counts.items():
                        batch.command("HINCRBY", key, outcome, value)
                    add_to_pipeline(batch, queue, counts, types)
                    add_runs(batch, queue, runs)
                    add_functions(batch, queue, fns)
                replies = batch.execute(resend="missing")
        except BaseException:
            if batch is not None and batch.sent:
                raise  # the counters were applied: sending them again would count twice
            with self._lock:  # not sent: count them again next time
                for queue, counts, types, runs, fns in pending:
                    self._counts[queue.name].update(counts)
                    self._types[queue.name].update(types)
                    self._runs[queue.name][:0] = runs
                    for name, tally in fns.items():
                        self._fns[queue.name].setdefault(name, Tally()).merge(tally)
            raise
        for reply in replies:
            if isinstance(reply, Exception):
                raise reply

    def _count(self) -> None:
        with self._lock:
            self.summary.processed += 1
            if self.progress is not None:
                self.progress(self.summary)
