"""The ``thread`` pool: N worker threads fed by the one claim loop of the main thread.

The main thread claims only as many tasks as there are free threads (so no task
waits claimed but unstarted behind a busy one), hands each to a thread at once,
and otherwise waits: for a free thread when all are busy, on the queues' signal
lists when some are idle (at most :data:`~.worker.ACK_INTERVAL` while tasks run,
so finished ones are acked within it). Finished tasks are acked with the next
claim. Each thread runs :meth:`Worker._execute <.worker.Worker._execute>`, the
path every pool shares: a failed run's ``retry`` is sent from that thread.

The lease keeper watches each running task. A thread that meets a Redis outage
while recording a failure logs it and goes on: that task's lease expires and it
comes back (the main thread rides the outage out as in ``solo``).

Stopping: no more claims; a task a thread had not started yet is given back at
once (``release``); running tasks finish; then :meth:`ThreadPool.finish` returns.
"""

from __future__ import annotations

import contextlib
import logging
import queue as stdlib_queue
import threading
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from .database import close_old_connections
from .pools import claim_lease
from .queue import Queue
from .records import Task
from .stops import OUTAGES, Interrupted

if TYPE_CHECKING:
    from .worker import Worker  # the worker builds its pool: no import back at run time

logger = logging.getLogger("django_redislock.worker")


@contextlib.contextmanager
def contained(queue: Queue, task: Task) -> Iterator[None]:
    """Log what goes wrong around a run (recording its outcome, giving it back): a pool's
    thread or event loop must outlive it. The run's own failures are recorded before this.

    A Redis outage leaves the task to its lease: it comes back, at least once.
    """
    try:
        yield
    except BaseException as exc:  # a SystemExit or KeyboardInterrupt too: the thread lives on
        around_run(queue, task, exc)


def around_run(queue: Queue, task: Task, exc: BaseException) -> None:
    """Log ``exc``, raised around the run of ``task`` (see :func:`contained`)."""
    if isinstance(exc, OUTAGES):
        logger.warning(
            "task %s of %r: its outcome could not be recorded, Redis is unreachable (%s); "
            "it comes back after its lease",
            task.id,
            queue.name,
            exc,
        )
    else:
        logger.error(
            "task %s of %r: the worker failed around the run",
            task.id,
            queue.name,
            exc_info=exc,
        )


#: Longest single wait of the main thread for a free slot (it then flushes acks, checks limits).
SLOT_WAIT = 0.2


class ThreadPool:
    """``concurrency`` daemon threads; :meth:`round` claims for the free ones."""

    kind = "thread"

    def __init__(self, worker: Worker) -> None:
        self.worker = worker
        self.concurrency = worker.concurrency
        #: tasks handed to the pool and not finished (started or about to be)
        self.running = 0
        self._slots = threading.Condition()
        self._inbox: stdlib_queue.SimpleQueue[tuple[Queue, Task, float] | None] = (
            stdlib_queue.SimpleQueue()
        )
        self._threads: list[threading.Thread] = []
        self._turn = 0
        #: why the pool can run nothing more (a dead event loop), else None
        self.broken: str | None = None

    # -- the main thread -------------------------------------------------------------------

    def free(self) -> int:
        """Slots for new tasks (never counting runs that outlived their hard limit as free)."""
        return self.concurrency - self.running

    def round(self) -> bool:
        """Claim for the free slots, queue by queue (rotating), and start them; False if idle."""
        worker = self.worker
        free = self.free()
        if free <= 0:
            self.wait_slot()
            return True
        claimed = False
        names = worker.queues[self._turn :] + worker.queues[: self._turn]
        names.sort(key=lambda queue: queue.name not in worker._ready)  # its claim is made
        self._turn = (self._turn + 1) % len(worker.queues)
        for queue in names:
            count = min(free, worker.batch)
            if worker.max_tasks is not None:
                count = min(count, worker.max_tasks - worker.summary.processed - self.running)
            if count <= 0 or worker._done():
                break
            claim = worker._claim(queue, count)
            if claim.tasks:
                self.submit_all(queue, claim.tasks, claim_lease(claim))
            free -= len(claim.tasks)
            claimed = claimed or bool(claim.tasks)
        worker._flush_acks()
        return claimed

    def submit_all(self, queue: Queue, tasks: list[Task], lease: float) -> None:
        """Hand a claim's tasks to the pool, in their order."""
        for task in tasks:
            self.submit(queue, task, lease)

    def submit(self, queue: Queue, task: Task, lease: float) -> None:
        """Hand a claimed task to a free thread."""
        with self._slots:
            self.running += 1
        self._inbox.put((queue, task, lease))
        self._ensure_threads()

    def wait(self) -> None:
        """Nothing was claimed: wait for a free slot, or for work while some slots are free."""
        worker = self.worker
        if self.running == 0:
            worker._idle(worker._wait_seconds())
        elif self.free() <= 0 or worker.burst:
            self.wait_slot()
        else:
            worker._idle(min(worker._wait_seconds(), worker._ack_every))

    def wait_slot(self, seconds: float = SLOT_WAIT) -> None:
        """Block until a run ends or ``seconds`` pass (a stop signal cuts it short)."""
        worker = self.worker
        worker._waiting = True
        try:
            with self._slots:
                if not worker._stopping:
                    self._slots.wait_for(lambda: self.running < self.concurrency, seconds)
        except Interrupted:
            pass
        finally:
            worker._waiting = False
        worker._flush_acks()

    def finish(self) -> None:
        """Let the running tasks end (a run that cannot be ended is left: the process exits)."""
        worker = self.worker
        deadline_note = time.monotonic() + 30
        while self.running > len(worker._hung) and self.broken is None:
            try:
                with self._slots:
                    self._slots.wait_for(lambda: self.running <= len(worker._hung), SLOT_WAIT)
                worker._flush_acks()
                worker._flush_counters()
            except OUTAGES as exc:
                logger.warning("could not ack while stopping: Redis is unreachable (%s)", exc)
            if time.monotonic() > deadline_note:
                logger.warning("still waiting for %d running task(s) to end", self.running)
                deadline_note = time.monotonic() + 30

    def give_back_unstarted(self) -> None:
        """Release the tasks handed to the pool that no thread took yet (a forced stop)."""
        items: list[tuple[Queue, Task, float]] = []
        with contextlib.suppress(stdlib_queue.Empty):
            while True:
                item = self._inbox.get_nowait()
                if item is not None:
                    items.append(item)
        for queue, task, _ in items:
            try:
                self.give_back(queue, task)
            except Exception as exc:  # its lease ends and it comes back without a charge
                logger.error("could not give back task %s: %s", task.id, exc, exc_info=exc)
            with self._slots:
                self.running -= 1

    def health(self) -> tuple[bool, str]:
        """``(ok, why not)``: every thread that was started is alive (the heartbeat sends it)."""
        if self.broken is not None:
            return False, self.broken
        dead = sum(not thread.is_alive() for thread in self._threads)
        if dead:
            return False, f"{dead} of {len(self._threads)} pool threads dead"
        return True, ""

    def close(self) -> None:
        """End the threads once their current task is done (daemons: an exit does not wait)."""
        for _ in self._threads:
            self._inbox.put(None)
        self._threads = []

    # -- the worker threads ----------------------------------------------------------------

    def _ensure_threads(self) -> None:
        """One thread per task handed over and not finished, up to ``concurrency``.

        Started as tasks come rather than all with the first one: starting 32 threads
        before the first run cost a fresh worker 45 ms (median, a loaded 2-CPU machine)
        between its first claim and its first run. Threads are never fewer than the
        tasks handed over, so every task in the inbox has a thread to take it.
        """
        while len(self._threads) < min(self.concurrency, self.running):
            number = len(self._threads) + 1
            thread = threading.Thread(
                target=self._serve, name=f"redislock-worker-{number}", daemon=True
            )
            self._threads.append(thread)
            thread.start()

    def _serve(self) -> None:
        try:
            while True:
                item = self._inbox.get()
                if item is None:
                    return
                try:
                    self.run_one(*item)
                except BaseException:  # run_one contains the run's own: this is the pool's
                    logger.critical("pool thread: task %s escaped its run", item[1].id)
                finally:
                    with self._slots:
                        self.running -= 1
                        self._slots.notify_all()
        finally:
            # a thread that ended without being told to leaves its place to a new one
            with self._slots, contextlib.suppress(ValueError):
                self._threads.remove(threading.current_thread())

    def run_one(self, queue: Queue, task: Task, lease: float) -> None:
        """Run one task in this thread; what goes wrong around it never ends the thread."""
        worker = self.worker
        try:
            with contained(queue, task):
                if worker._stopping:
                    self.give_back(queue, task)
                    return
                worker._execute(queue, task, lease)
        finally:
            close_old_connections()

    def give_back(self, queue: Queue, task: Task) -> None:
        """A claimed task that had not started when the worker began to stop: release it."""
        released = queue.release([task])
        with self.worker._lock:
            self.worker.summary.released += released
