"""One run of one claimed task, the path every pool shares, and what a hung run does.

:meth:`Runs._execute` decodes the task, records its start when it must
(:meth:`Runs._begin`), lets the lease keeper watch it, runs it within its time
limits (:mod:`.limits`) and hands the outcome to :mod:`.outcomes`. The ``solo``
loop calls it on the main thread, the ``thread`` pool from its threads; the
``async`` pool has an asyncio twin (:func:`.pool_async.execute_async`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from typing import Any

from .. import signals
from .call_options import expired
from .control import Control, cancelled_error, ended_by, enter, leave
from .database import close_old_connections
from .keeper import LeaseKeeper, Watch
from .limits import LimitWatch, Run, alarm, keep_for, limits_of
from .outcomes import Outcomes
from .payloads import HOPELESS, TRANSIENT, Runnable, needs_start, runnable, task_path
from .queue import Queue
from .records import Claim, Task
from .results import store_success
from .stops import HungTask, PoolBroken
from .throttle import admit

logger = logging.getLogger("django_redislock.worker")

#: The exit status of a solo worker whose running task outlived its hard limit.
EXIT_HUNG = 70


class Runs(Outcomes):
    """The run-one-task half of :class:`~.worker.Worker` (a mixin: it owns no loop)."""

    _keeper: LeaseKeeper
    _limits: LimitWatch
    _executor: Any
    #: solo: the running batch and the position of the first task after the running one
    #: (sliced only when the keeper renews or the batch is given back)
    _rest: tuple[list[Task], int]
    _current: dict[tuple[str, str], tuple[float, float]]
    #: the running tasks themselves, by (queue, id): a claim that hands one back is adopted
    _live: dict[tuple[str, str], Task]
    #: how a cancel reaches each running task, by (queue, id) (see :mod:`.control`)
    _controls: dict[tuple[str, str], Control]
    _hung: list[Run]
    _claim_lost: bool
    pool: str
    #: the ForcedStop the worker raised itself (None until a second stop signal)
    _stop_raised: BaseException | None

    def stop(self) -> None:
        raise NotImplementedError

    def _begin(self, queue: Queue, task: Task, fn: Runnable, lease: float) -> bool:
        """Record the start of a suspect, or of a task with its own settings, before it runs.

        One round trip for these only: a suspect may be the task that killed its last
        worker, so its neighbours' acks go first and its run is charged now; a task
        with its own ``max_attempts`` or ``lease`` gets them kept with its claim. False
        when the claim is no longer current (the task is not run).
        Called only for a run that :func:`~.payloads.needs_start`.
        """
        if task.suspect:
            self._flush_acks(force=True)
        if queue.start(task, fn.lease if fn.lease is not None else lease or None, fn.max_attempts):
            return True
        self._claim_lost = True
        return False

    def _execute(self, queue: Queue, task: Task, lease: float) -> None:
        """Run one claimed task in this thread and record its outcome.

        The path of every task of the solo and thread pools: the checks that cost a
        call only for some tasks (a rate limit, a start recorded before the run, time
        limits) are tested here first.
        """
        try:
            fn = runnable(task)
        except TRANSIENT as exc:
            self._postpone(queue, task, exc)
            return
        except HOPELESS as exc:
            self._bury(queue, task, exc)
            return
        task.unique_for = getattr(fn, "unique_for", None)  # the window its ack opens
        # as around a request: one call between two tasks closes what the previous one left
        # unusable and readies the next; _run_batch makes the call after the last task
        close_old_connections()
        if getattr(fn, "rate_limit", None) is not None and not admit(queue, task, fn):
            # given back by its rate limit: no longer ours
            if self._executor is None and not self._keeper.lost:
                self._keeper.clear()  # solo: a watch of the batch would renew this task too
            return
        if self._not_to_start(queue, task):
            return
        if needs_start(task, fn) and not self._begin(queue, task, fn, lease):
            return
        signals.task_started.send(sender=Queue, queue=queue, task=task)
        limits = limits_of(fn, queue.backend.options)
        watch = self._watch_run(queue, task, fn, lease, limits[0])
        began = time.monotonic()
        control = Control(queue.name, task)
        self._started(queue, task, began, control)
        token = enter(control)
        try:
            if limits[0] is None and limits[1] is None:
                result = fn.run(task.payload)
            else:
                result = self._call(queue, task, fn, limits, watch)
            control.close()
        except BaseException as exc:  # SystemExit, KeyboardInterrupt...: the task's failure
            control.close()
            if exc is self._stop_raised:
                raise  # the worker's own second-signal stop (told apart by identity)
            self._raised(queue, task, fn, exc, control=control, began=began)
        else:
            self._returned(queue, task, control, result, time.monotonic() - began)
        finally:
            leave(token)
            self._ended(queue, task, watch)
            self._count()

    def _raised(
        self,
        queue: Queue,
        task: Task,
        fn: Runnable,
        exc: BaseException,
        *,
        control: Control,
        began: float,
    ) -> None:
        """Record a run that raised: a failure, or the end of a cancelled run."""
        self._leaving(queue, task)
        if control.cancelled:
            self._ended_early(queue, task, ended_by(exc, task.id), time.monotonic() - began)
        else:
            self._failed(queue, task, fn, exc, time.monotonic() - began)

    def _returned(
        self, queue: Queue, task: Task, control: Control, result: Any, runtime: float
    ) -> None:
        """Record a run that returned: its value, or a cancel it caught (still cancelled)."""
        if control.cancelled:
            self._ended_early(queue, task, cancelled_error(task.id), runtime)
        else:
            store_success(queue, task, result)  # store_result tasks only: before the ack
            self._succeeded(queue, task, result, runtime)

    def _not_to_start(self, queue: Queue, task: Task) -> bool:
        """End a task that expired, or was cancelled while it waited in this worker's claim,
        instead of starting it (True); False for every other task (no round trip)."""
        why: BaseException | None = expired(task)
        if why is None and task.cancel_requested:
            why = cancelled_error(task.id)
        if why is None:
            return False
        self._ended_early(queue, task, why, None)
        self._count()
        return True

    def _on_cancel(self, watch: Watch) -> None:
        """A lease renewal answered that the run of ``watch`` was cancelled: stop it."""
        with self._lock:
            control = self._controls.get((watch.queue.name, watch.current.id))
        if control is not None and control.task is watch.current:
            loop = getattr(self._executor, "_loop", None)
            if control.cancel(loop):
                logger.warning(
                    "task %s of %r: cancelled while it ran, stopping it",
                    watch.current.id,
                    watch.queue.name,
                )

    def _started(
        self, queue: Queue, task: Task, since: float | None = None, control: Control | None = None
    ) -> None:
        """Enter the run in :meth:`running` (the workers registry reads it at each heartbeat).

        ``since``: when it began on the monotonic clock (default: now); ``control``: how a
        cancel reaches it (see :mod:`.control`).
        """
        began = time.monotonic() if since is None else since
        key = (queue.name, task.id)  # one key for the three entries: one object fewer per run
        with self._lock:
            self._current[key] = (time.time(), began)
            self._live[key] = task
            if control is not None:
                self._controls[key] = control

    def _adopt(self, queue: Queue, claim: Claim) -> None:
        """Drop from ``claim`` the tasks this worker is running; their runs take its tokens.

        A claim hands back a running task only after its lease lapsed (renewals failed
        through an outage longer than the lease): starting it again would run two copies
        in one worker. The run goes on under the newer claim instead (its renewals and
        its ack use the new token), so the task still runs once here.
        """
        with self._lock:
            kept = []
            for task in claim.tasks:
                running = self._live.get((queue.name, task.id))
                if running is None:
                    kept.append(task)
                    continue
                running.claim = task.claim
                logger.warning(
                    "task %s of %r was handed out again while this worker still runs it (its "
                    "lease lapsed); the run goes on under the new claim, no second copy starts",
                    task.id,
                    queue.name,
                )
        claim.tasks[:] = kept  # a frozen Claim; its list is this worker's own

    def _leaving(self, queue: Queue, task: Task) -> None:
        """The run's code has ended: a claim that hands the task back now (its retry, due
        in a few ms) brings a new attempt to start, not a lapsed lease to adopt."""
        with self._lock:
            self._live.pop((queue.name, task.id), None)

    def _ended(self, queue: Queue, task: Task, watch: Watch | None) -> None:
        key = (queue.name, task.id)
        with self._lock:
            self._current.pop(key, None)
            self._live.pop(key, None)
            self._controls.pop(key, None)
        # every pool: a run is renewed while it lives (.limits.keep_for), so a finished one
        # must not be renewed after its ack (Redis would answer that its claim is gone)
        self._keeper.unwatch(watch)

    def _call(
        self,
        queue: Queue,
        task: Task,
        fn: Runnable,
        limits: tuple[float | None, float | None],
        watch: Watch | None,
    ) -> Any:
        """``fn.run(payload)``, within the run's time limits (see :mod:`.limits`)."""
        hard, soft = limits
        if hard is None and soft is None:
            return fn.run(task.payload)
        main = threading.current_thread() is threading.main_thread()
        label = f"task {task.id} ({task_path(task)}) of {queue.name!r}"
        run = Run(soft, hard, label, raise_in_thread=not main)
        run.watch = watch
        self._limits.add(run)
        try:
            with alarm(run) if main else contextlib.nullcontext():
                return run.call(lambda: fn.run(task.payload))
        finally:
            self._limits.discard(run)

    def _watch_run(
        self, queue: Queue, task: Task, fn: Runnable, lease: float, hard: float | None
    ) -> Watch | None:
        """Let the keeper give this run its whole lease (solo: and keep the batch leased)."""
        if lease <= 0:
            return None
        run_for = keep_for(fn.lease or lease, hard)
        if hard is not None and fn.lease is not None:
            # renewed within its own lease, which may be far shorter than the claim's
            lease = min(lease, fn.lease)
        if self._executor is not None:
            return self._keeper.watch(
                queue, task, list, lease, run_for, max_attempts=fn.max_attempts
            )
        batch, after = self._rest
        self._keeper.clear_watches()  # solo: the one running task replaces the last one
        return self._keeper.watch(
            queue,
            task,
            lambda: batch[after:] + self._acks[queue.name],
            lease,
            run_for,
            max_attempts=fn.max_attempts,
        )

    def health(self) -> tuple[bool, str]:
        """``(ok, why not)`` of the pool, for the heartbeat: a worker is alive only if its
        pool is (threads alive, event loop answering, no run stuck past its hard limit)."""
        if self._hung:
            return False, f"{self._hung[0].label} is stuck past its time limit"
        if self._executor is not None:
            ok, why = self._executor.health()
            return bool(ok), str(why)
        return True, ""

    def _raise_if_stopped_by_a_run(self) -> None:
        """End :meth:`run` non-zero when a run stopped the worker (a pool broke, a run hung)."""
        if self._executor is not None and self._executor.broken is not None:
            raise PoolBroken(f"the {self.pool} pool broke: {self._executor.broken}")
        if not self._hung:
            return
        hung = self._hung[0]
        if hung.active:
            raise HungTask(
                f"{hung.label} outlived its time limit and could not be ended; the "
                "worker stopped so that its process can be replaced (the task comes back "
                "after its lease, charged one attempt)"
            )
        raise HungTask(
            f"{hung.label} blocked its worker past its time limit and the grace, then "
            "ended (its outcome was recorded); the worker stopped so that its process "
            "can be replaced"
        )

    def _on_hung(self, run: Run) -> None:
        """A run outlived its hard limit + grace (called by the limit watch's thread)."""
        if run.watch is not None:
            self._keeper.hold(run.watch)  # nobody else may run it while it still runs here
            self._charge(run.watch)
        self._hung.append(run)
        self.stop()
        if self._executor is None and run.raise_in_thread is False:
            self._abandon_solo()

    @staticmethod
    def _charge(watch: Watch) -> None:
        """Record the hung run's start now if the keeper had not yet (its one attempt)."""
        if watch.current_set:
            return
        try:
            watch.queue.start(watch.current, watch.lease, watch.max_attempts)
            watch.current_set = True
        except Exception as exc:  # the keeper records it at its next renewal
            logger.error("could not record the start of a hung run: %s", exc, exc_info=exc)

    def _give_back_rest(self) -> None:
        """Release the solo batch's unstarted tasks now (a stop that did not let the batch
        end: a second stop signal, an error of the worker); best effort, logged."""
        batch, after = self._rest
        self._rest = ([], 0)
        rest = batch[after:]
        try:
            for queue in self.queues:
                mine = [task for task in rest if task.queue == queue.name]
                if mine:
                    released = queue.release(mine)
                    with self._lock:
                        self.summary.released += released
        except Exception as exc:  # their lease ends and they come back without a charge
            logger.error("could not give back the unstarted tasks: %s", exc, exc_info=exc)

    def _abandon_solo(self) -> None:
        """The main thread is stuck in the task: give the batch back and end the process."""
        try:
            batch, after = self._rest
            rest = batch[after:]
            for queue in self.queues:
                mine = [task for task in rest if task.queue == queue.name]
                if mine:
                    queue.release(mine)
            self._flush_acks(force=True)
            self._flush_counters(force=True)
        except Exception as exc:  # the exit must happen whatever Redis does
            logger.error("could not give back the batch before exiting: %s", exc, exc_info=exc)
        logger.critical("exiting with status %d so the worker can be replaced", EXIT_HUNG)
        logging.shutdown()
        os._exit(EXIT_HUNG)
