"""The ``async`` pool: one event loop with up to N tasks in flight.

The claim loop is the thread pool's (:class:`~.pool_thread.ThreadPool`: the main
thread claims for the free slots, waits, stops, rides out outages); only the
runs differ. Each claimed task becomes a coroutine on one event loop, in its own
thread:

* an ``async def`` task is awaited on that loop, its hard limit enforced by
  ``asyncio.wait_for`` (the coroutine is cancelled); a soft limit cannot be raised
  into a coroutine (asyncio delivers only ``CancelledError``), so it does not apply;
* a sync task runs in a daemon thread of its own (like ``asyncio.to_thread``, but a
  thread that cannot be ended must not hold up the process's exit), with the
  thread pool's limits.

The task's own Redis calls (``start`` of a suspect, ``retry`` of a failure, the
suspect's early acks, giving back an unstarted task) use the queue's asyncio API
on that loop. An ``async def`` task that blocks the loop (a sync sleep) blocks
every task of the pool, and no timeout can fire: the limit watch then ends the
worker as for a hung thread (see :mod:`.limits`).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import threading
import time
from typing import TYPE_CHECKING, Any

from .. import signals
from .async_calls import Escaped, call_async, in_thread
from .call_options import expired
from .control import Control, cancelled_error, ended_by, enter, leave
from .limits import limits_of
from .payloads import HOPELESS, TRANSIENT, Runnable, needs_start, runnable
from .pool_loop import fine_timer_slack, new_loop
from .pool_thread import ThreadPool, around_run
from .queue import Queue
from .records import Task
from .results import store_success_async
from .throttle import admit

if TYPE_CHECKING:
    from .worker import Worker  # the worker builds its pool: no import back at run time

logger = logging.getLogger("django_redislock.worker")

#: A loop that has not run a heartbeat's probe for this many heartbeats is shown wedged.
STALL_BEATS = 2.0


class AsyncPool(ThreadPool):
    """The thread pool's claim loop, with the runs on one event loop."""

    kind = "async"

    def __init__(self, worker: Worker) -> None:
        super().__init__(worker)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        #: when the loop was sent the probe it has not run yet (monotonic), else None
        self._probe_sent: float | None = None
        #: a loop that ran no probe for this long is wedged: two heartbeats, at least 1 s
        beat = float(worker.backend.options.get("WORKER_HEARTBEAT", 5.0))
        self._stall = max(STALL_BEATS * beat, 1.0)
        #: the runs on the loop (the loop keeps only weak references to its tasks)
        self._runs: set[asyncio.Task[None]] = set()

    def round(self) -> bool:
        """The thread pool's round, with the loop started before its first claim is sent.

        Building the loop and starting its thread (about 0.5-3 ms on a loaded machine) then
        overlaps the claim's round trip instead of following it: a fresh worker's first run
        starts as soon as its first claim is answered, as in the thread pool.
        """
        self._ensure_loop()
        return super().round()

    def submit_all(self, queue: Queue, tasks: list[Task], lease: float) -> None:
        """Hand a claim's tasks to the loop in one wake-up (one callback for the claim)."""
        with self._slots:
            self.running += len(tasks)
        # a plain callback that creates the runs' tasks on the loop: no concurrent Future
        # chained to them (run_coroutine_threadsafe), nothing for the claim loop to wait on
        self._ensure_loop().call_soon_threadsafe(self._start, queue, list(tasks), lease)

    def submit(self, queue: Queue, task: Task, lease: float) -> None:
        self.submit_all(queue, [task], lease)

    def _start(self, queue: Queue, tasks: list[Task], lease: float) -> None:
        runs, create = self._runs, asyncio.get_running_loop().create_task
        for task in tasks:
            runs.add(create(self._serve_one(queue, task, lease)))  # _serve_one discards it

    def close(self) -> None:
        loop, self._loop = self._loop, None
        if loop is not None:
            loop.call_soon_threadsafe(loop.stop)

    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            self._loop = new_loop()  # timers to the microsecond (see .pool_loop)
            self._thread = threading.Thread(
                target=self._run_loop, args=(self._loop,), name="redislock-async", daemon=True
            )
            self._thread.start()
        return self._loop

    def _run_loop(self, loop: asyncio.AbstractEventLoop) -> None:
        """The loop's thread: a loop that ends while the pool still uses it breaks the pool.

        No task's exception gets here (each run contains its own); if the loop ends anyway,
        its runs can never finish, so the worker stops (exit 1) naming what was running.
        """
        fine_timer_slack()  # this thread's timed waits end on time (see .pool_loop)
        try:
            loop.run_forever()
        except BaseException as exc:
            self._broke(f"the event loop ended ({type(exc).__name__}: {exc})", exc)
            return
        if self._loop is loop:  # not close(): stopped by something else
            self._broke("the event loop stopped", None)

    def _broke(self, why: str, exc: BaseException | None) -> None:
        running = ", ".join(task_id for _, task_id, _ in self.worker.running()) or "none"
        self.broken = f"{why}; running tasks: {running}"
        logger.critical("async pool: %s; the worker stops", self.broken, exc_info=exc)
        self.worker.stop()
        with self._slots:
            self._slots.notify_all()

    def health(self) -> tuple[bool, str]:
        """``(ok, why not)``: the loop runs and ran the last probe within :data:`STALL_BEATS`
        heartbeats (at least 1 s).

        Called from the heartbeat thread: each call sends the loop one no-op callback
        (when the last one ran), so a loop blocked by a task shows at the next beats.
        """
        if self.broken is not None:
            return False, self.broken
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return True, ""
        if not thread.is_alive():
            return False, "the event loop's thread is dead"
        sent = self._probe_sent
        now = time.monotonic()
        if sent is not None:
            if now - sent >= self._stall:
                return False, f"the event loop has not answered for {now - sent:.1f}s"
            return True, ""
        self._probe_sent = now
        try:
            loop.call_soon_threadsafe(self._answered)
        except RuntimeError:  # closed meanwhile
            self._probe_sent = None
        return True, ""

    def _answered(self) -> None:
        self._probe_sent = None

    async def _serve_one(self, queue: Queue, task: Task, lease: float) -> None:
        """One run, contained (as :func:`~.pool_thread.contained` contains the thread pool's):
        a plain ``try`` here, no context manager object kept for the whole run."""
        worker = self.worker
        try:
            if worker._stopping:
                released = await queue.release_async([task])
                with worker._lock:
                    worker.summary.released += released
            else:
                await execute_async(worker, queue, task, lease)
        except BaseException as exc:  # a SystemExit or KeyboardInterrupt too: the loop lives on
            around_run(queue, task, exc)
        finally:
            self._runs.discard(asyncio.current_task())
            with self._slots:
                self.running -= 1
                self._slots.notify_all()


async def execute_async(worker: Worker, queue: Queue, task: Task, lease: float) -> None:
    """The asyncio twin of :meth:`Worker._execute <.worker.Worker._execute>`."""
    try:
        fn = runnable(task)
    except TRANSIENT as exc:
        await in_thread(worker._postpone, queue, task, exc)
        return
    except HOPELESS as exc:
        await in_thread(worker._bury, queue, task, exc)
        return
    task.unique_for = getattr(fn, "unique_for", None)  # the window its ack opens
    # a rate limit costs a call (in a thread: admit blocks); a task without one starts no thread
    if getattr(fn, "rate_limit", None) is not None and not await in_thread(admit, queue, task, fn):
        return  # given back by its rate limit
    if (expired(task) is not None or task.cancel_requested) and await in_thread(
        worker._not_to_start, queue, task
    ):
        return
    if needs_start(task, fn) and not await begin_async(worker, queue, task, fn, lease):
        return
    signals.task_started.send(sender=Queue, queue=queue, task=task)
    limits = limits_of(fn, queue.backend.options)
    watch = worker._watch_run(queue, task, fn, lease, limits[0])
    began = time.monotonic()
    control = Control(queue.name, task, thread=False)
    if inspect.iscoroutinefunction(getattr(fn, "fn", None)) and isinstance(task.payload, dict):
        control.future = asyncio.current_task()  # see coroutine_of
    worker._started(queue, task, began, control)
    token = enter(control)
    try:
        result = await call_async(
            worker, queue, task, fn, limits=limits, watch=watch, control=control
        )
        control.close()
    except BaseException as exc:  # CancelledError, SystemExit...: the task's failure
        control.close()
        if isinstance(exc, Escaped):
            exc = exc.error
        runtime = time.monotonic() - began
        worker._leaving(queue, task)
        if control.cancelled:
            uncancel()
            await in_thread(worker._ended_early, queue, task, ended_by(exc, task.id), runtime)
        else:
            args = worker._retry_args(queue, task, fn, exc, runtime)
            outcome = await queue.retry_async(task, **args)
            worker._log_failure(queue, task, outcome, exc, runtime)
    else:
        await returned_async(worker, queue, task, control, result, began=began)
    finally:
        leave(token)
        worker._ended(queue, task, watch)
        worker._count()


async def returned_async(
    worker: Worker, queue: Queue, task: Task, control: Control, result: Any, *, began: float
) -> None:
    """:meth:`Worker._returned <.worker.Worker._returned>` with the asyncio API."""
    runtime = time.monotonic() - began
    if control.cancelled:  # it caught the cancel and returned: still cancelled
        uncancel()
        await in_thread(worker._ended_early, queue, task, cancelled_error(task.id), runtime)
    else:
        await store_success_async(queue, task, result)  # store_result tasks: before the ack
        worker._succeeded(queue, task, result, runtime)


def uncancel() -> None:
    """A cancelled run's asyncio task goes on to record it: its cancel request is spent."""
    current: Any = asyncio.current_task()
    if current is not None and getattr(current, "cancelling", lambda: 0)():
        current.uncancel()  # Python 3.11+ (3.10 keeps no count)


async def begin_async(worker: Worker, queue: Queue, task: Task, fn: Runnable, lease: float) -> bool:
    """:meth:`Worker._begin <.worker.Worker._begin>` with the asyncio API (called only for a
    run that :func:`~.payloads.needs_start`)."""
    if task.suspect:
        await flush_acks_async(worker)
    started: bool = await queue.start_async(
        task, fn.lease if fn.lease is not None else lease or None, fn.max_attempts
    )
    return started


async def flush_acks_async(worker: Worker) -> None:
    """Send every finished task's ack now (a suspect's neighbours go first)."""
    for queue in worker.queues:
        tasks = worker._take_acks(queue)
        if tasks:
            try:
                await queue.ack_async(tasks)
            except BaseException:
                worker._keep_acks(queue, tasks)
                raise
