"""A run's control: ``current_task`` inside a task, and how a cancel reaches a running run.

Each run a worker starts gets a :class:`Control` (its task, the thread or asyncio task
running it), made current for the run's code through a context variable, so a task can
ask :data:`current_task` for its id and whether it was cancelled.

A cancel (:meth:`Queue.cancel <django_redislock.queue.Queue.cancel>`) is a field in the
queue's cancel hash; the worker learns of it with the lease renewal of the run (no call of
its own, see :mod:`.keeper`) and calls :meth:`Control.cancel`, which delivers
:class:`~django_redislock.exceptions.TaskCancelled` the way the time limits do
(:mod:`.limits`):

* ``thread`` pool, and the sync tasks of ``async``: an asynchronous exception in the run's
  thread, raised at its next bytecode (a call blocked in C gets it when it returns);
* ``async`` pool, ``async def`` tasks: the asyncio task is cancelled (``CancelledError`` at
  its next ``await``), recorded as ``TaskCancelled``;
* ``solo`` and the ``process`` pool's children (whose runs are solo runs in the child's
  main thread): the asynchronous exception, plus a ``SIGALRM`` to the main thread when a
  Python handler is installed (``drain_queue`` installs one), so that a blocking ``sleep``
  or socket read is interrupted as the time limit interrupts it.

The exception is sent once, only while the run is active (under its lock), and one still
pending when the run ends is dropped, so it never lands in the worker's own bookkeeping.
"""

from __future__ import annotations

import contextvars
import signal
import threading
from typing import Any

from ..exceptions import TaskCancelled
from .limits import set_async_exc

#: Guards what a cancel sends against the end of the run (one for all runs: cancels are rare).
_LOCK = threading.Lock()


class Control:
    """One run: what :data:`current_task` answers, and the way to stop it."""

    __slots__ = ("active", "cancelled", "future", "queue", "sent", "task", "thread")

    def __init__(self, queue: str, task: Any, thread: bool = True) -> None:
        self.queue = queue
        self.task = task
        #: the thread running it (None until :meth:`bind` for a sync run of the async pool)
        self.thread: int | None = threading.get_ident() if thread else None
        #: the asyncio task of an ``async def`` run (the async pool sets it)
        self.future: Any = None
        self.active = True
        self.cancelled = False
        self.sent = False

    def cancel(self, loop: Any = None) -> bool:
        """Stop the run (called from the lease keeper's thread); False if it already ended.

        ``loop``: the async pool's event loop, where an ``async def`` run is cancelled.
        """
        with _LOCK:
            if not self.active or self.cancelled:
                return False
            self.cancelled = True
            if self.future is not None:
                if loop is not None:
                    loop.call_soon_threadsafe(self._cancel_future)
                return True
            if self.thread is None:  # a sync run of the async pool not in its thread yet
                return True  # bind() raises it there
            self.sent = True
            set_async_exc(self.thread, cancelled_error(self.task.id))
            # sent while the run is active: its handler runs at the main thread's next
            # bytecode, within this run
            if self.thread == threading.main_thread().ident and callable(
                signal.getsignal(signal.SIGALRM)
            ):
                signal.pthread_kill(self.thread, signal.SIGALRM)  # cuts a blocking call short
        return True

    def _cancel_future(self) -> None:
        """On the event loop (where the run is closed too): cancel it if it still runs."""
        if self.active and self.future is not None:
            self.future.cancel()

    def bind(self) -> None:
        """The run goes on in this thread from now (a sync task of the async pool)."""
        with _LOCK:
            self.thread = threading.get_ident()
            cancelled = self.cancelled
        if cancelled:
            with _LOCK:
                self.sent = True  # nothing pending: close() clears nothing it should not
            raise cancelled_error(self.task.id)

    def close(self) -> None:
        """The run's code ended: no exception may be sent any more, a pending one is dropped.

        Every run calls it, so the common case (nothing was sent, no cancel under way) takes
        no lock: a cancel checks ``active`` under the lock, so once ``active`` is False
        either it holds the lock now (``locked()``) or it already set ``sent``, or it will
        find the run ended.
        """
        self.active = False
        if not self.sent and not _LOCK.locked():
            return
        for _ in range(3):
            try:
                with _LOCK:
                    if self.sent and self.future is None and self.thread is not None:
                        set_async_exc(self.thread, None)
                return
            except TaskCancelled:  # it landed inside close: the run is over, close again
                continue


def cancelled_error(task_id: str) -> TaskCancelled:
    """The exception a cancelled run ends with."""
    return TaskCancelled(f"task {task_id} was cancelled while it ran")


def ended_by(exc: BaseException, task_id: str) -> BaseException:
    """The error a cancelled run is recorded with: its own ``TaskCancelled``, else a fresh one
    (the async pool's ``CancelledError``, or what the task raised while it cleaned up)."""
    return exc if isinstance(exc, TaskCancelled) else cancelled_error(task_id)


_current: contextvars.ContextVar[Control | None] = contextvars.ContextVar(
    "redislock_current_task", default=None
)


def enter(control: Control) -> contextvars.Token[Control | None]:
    """Make ``control`` the current run of this thread or asyncio task."""
    return _current.set(control)


def leave(token: contextvars.Token[Control | None]) -> None:
    _current.reset(token)


class CurrentTask:
    """The task running in this thread or asyncio task (``from django_redislock import
    current_task``). Outside a worker's run: ``id`` is None and ``cancelled()`` False."""

    @property
    def id(self) -> str | None:
        """The id of the running task, or None outside a run."""
        control = _current.get()
        return None if control is None else str(control.task.id)

    @property
    def queue(self) -> str | None:
        """The name of its queue, or None outside a run."""
        control = _current.get()
        return None if control is None else control.queue

    @property
    def attempts(self) -> int:
        """The number of this run (1 for the first), 0 outside a run."""
        control = _current.get()
        return 0 if control is None else int(control.task.attempts)

    def cancelled(self) -> bool:
        """True once the run was cancelled: a task that catches ``TaskCancelled`` (to clean
        up) or runs where the exception cannot reach it can check this and stop."""
        control = _current.get()
        return control is not None and control.cancelled

    def __repr__(self) -> str:
        return f"<current_task {self.id!r}>"


#: The running task, as seen from its own code.
current_task = CurrentTask()
