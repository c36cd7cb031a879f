"""``Enqueued``, the handle ``delay()`` returns: ``status``, ``result()``, ``result_async()``.

Waiting never polls: a waiter reads the result (one script), and while it is not
final blocks on the result's done list with ``BLMOVE done done RIGHT LEFT``.
The store script pushes one token there; ``BLMOVE`` onto the same list rotates
it instead of taking it, so every waiter of the result wakes, and a waiter that
is cut off (a timeout, a cancelled ``await``, a killed process) takes nothing
away from the others. Each block lasts at most :data:`MAX_BLOCK` seconds and
stays below the alias's ``SOCKET_TIMEOUT``; between two blocks the waiter reads
the result again, which is how it learns of an outcome no worker stored (a task
dead-lettered because its workers kept dying, or one removed by an operator).
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

from ..calls.wait import wait_on, wait_on_async
from ..exceptions import ConnectionFailed, ResultTimeout, ResultUnknown, TaskFailed
from ..handlers import queues
from ..validation import check_seconds
from .results import Outcome, ResultStatus, read_call, record_keys, run, run_async

if TYPE_CHECKING:
    from .queue import Queue

#: Longest single BLMOVE of a waiter, in seconds (then the result is read again).
MAX_BLOCK = 5.0
#: Pause after a wake-up that found no final result (a token that is not ours to trust).
SPURIOUS_PAUSE = 0.05


class ResultHandle:
    """What a queued ``@task`` call can tell about its run (mixed into ``Enqueued``).

    ``_where`` is the ``(alias, queue name)`` the call went to (None for a handle that
    knows no queue): names, not the queue object, so a handle pickles (into a session,
    a cache) and follows a settings reset. ``_known`` is the outcome when it is known
    without Redis (eager mode).
    """

    _where: tuple[str, str] | None = None
    _known: Outcome | None = None

    @property
    def task_id(self) -> str:
        """The id of the call (the handle itself is that string)."""
        return str.__str__(self)

    def _read(self) -> Outcome:
        if self._known is not None:
            return self._known
        queue = self._need_queue()
        return run(queue, read_call(queue, self.task_id))

    async def _read_async(self) -> Outcome:
        if self._known is not None:
            return self._known
        queue = self._need_queue()
        return await run_async(queue, read_call(queue, self.task_id))

    def _queue_or_none(self) -> Queue | None:
        return None if self._where is None else self._need_queue()

    def _need_queue(self) -> Queue:
        if self._where is None:
            raise ResultUnknown(f"no queue is known for {self.task_id!r}: use fn.result_of(id)")
        alias, name = self._where
        found: Queue = queues[alias].queue(name)
        return found

    def cancel(self, reason: str = "cancelled") -> str:
        """Cancel the call: ``"removed"`` (it was queued), ``"requested"`` (it is running:
        its worker stops it) or ``"finished"`` (nothing to cancel). See :meth:`Queue.cancel
        <django_redislock.queue.Queue.cancel>`."""
        cancelled: str = self._need_queue().cancel(self.task_id, reason)
        return cancelled

    async def cancel_async(self, reason: str = "cancelled") -> str:
        """The asyncio twin of :meth:`cancel`."""
        cancelled: str = await self._need_queue().cancel_async(self.task_id, reason)
        return cancelled

    @property
    def status(self) -> ResultStatus:
        """Where the call is now (one round trip): see :class:`ResultStatus`."""
        return self._read().status

    async def status_async(self) -> ResultStatus:
        """The asyncio twin of :attr:`status`."""
        return (await self._read_async()).status

    def result(self, timeout: float | None = None) -> Any:
        """The return value, waiting up to ``timeout`` seconds (None: as long as it takes).

        Raises :class:`TaskFailed` (with the stored error) when the call was
        dead-lettered, :class:`ResultUnknown` when nothing is known of it (its
        result expired, or it was removed, or never stored), and
        :class:`ResultTimeout` when ``timeout`` passed first.
        """
        deadline = start_wait(timeout)
        outcome = self._read()
        while not outcome.status.final:
            queue = self._need_queue()
            seconds = block_seconds(queue, deadline, self.task_id, outcome)
            done = record_keys(queue, self.task_id)[1]
            try:
                woke = wait_on(queue.backend, (done,), seconds, keep=True)
            except ConnectionFailed:  # a keeping wait lost nothing: the next read retries
                woke = None
                time.sleep(SPURIOUS_PAUSE)
            outcome = self._read()
            if woke is not None and not outcome.status.final:
                time.sleep(SPURIOUS_PAUSE)
        return settle(self.task_id, outcome, self._queue_or_none())

    async def result_async(self, timeout: float | None = None) -> Any:
        """The asyncio twin of :meth:`result`; cancelling it leaves nothing behind."""
        deadline = start_wait(timeout)
        outcome = await self._read_async()
        while not outcome.status.final:
            queue = self._need_queue()
            seconds = block_seconds(queue, deadline, self.task_id, outcome)
            done = record_keys(queue, self.task_id)[1]
            try:
                woke = await wait_on_async(queue.backend, (done,), seconds, keep=True)
            except ConnectionFailed:  # a keeping wait lost nothing: the next read retries
                woke = None
                await asyncio.sleep(SPURIOUS_PAUSE)
            outcome = await self._read_async()
            if woke is not None and not outcome.status.final:
                await asyncio.sleep(SPURIOUS_PAUSE)
        return settle(self.task_id, outcome, self._queue_or_none())


def start_wait(timeout: float | None) -> float | None:
    """The monotonic deadline of a wait (None: no deadline); checks ``timeout``."""
    if timeout is None:
        return None
    return time.monotonic() + check_seconds(timeout, "timeout", allow_zero=True)


def block_seconds(queue: Queue, deadline: float | None, task_id: str, outcome: Outcome) -> float:
    """How long the next BLMOVE may block; raises :class:`ResultTimeout` when time is up."""
    socket_timeout = float(queue.backend.options["SOCKET_TIMEOUT"])
    cap = min(MAX_BLOCK, socket_timeout - min(0.5, socket_timeout / 2))
    if deadline is not None:
        left = deadline - time.monotonic()
        if left <= 0:
            last = f"; last error: {outcome.error.splitlines()[0]}" if outcome.error else ""
            raise ResultTimeout(f"task {task_id!r} is still {outcome.status}{last}")
        cap = min(cap, left)
    return max(cap, 0.01)


def settle(task_id: str, outcome: Outcome, queue: Queue | None) -> Any:
    """The value of a final outcome, or the exception it stands for."""
    if outcome.status is ResultStatus.SUCCESSFUL:
        return outcome.decoded(task_id, None if queue is None else queue.serializer.loads)
    if outcome.status is ResultStatus.CANCELLED:
        raise TaskFailed(
            f"task {task_id!r} was cancelled: {outcome.error}", task_id=task_id, error=outcome.error
        )
    if outcome.status is ResultStatus.FAILED:
        raise TaskFailed(
            f"task {task_id!r} failed: {outcome.error}", task_id=task_id, error=outcome.error
        )
    raise ResultUnknown(
        f"no result of task {task_id!r}: it expired (result_ttl), was removed, or was never "
        f"stored (does the task have store_result=True?)"
    )


class Enqueued(str, ResultHandle):
    """The id of a call queued with ``@task``: a ``str``, plus whether it was queued.

    It is also the call's handle (:class:`~django_redislock.queue.handles.ResultHandle`):
    ``status``, ``result(timeout)`` and ``result_async(timeout)``.

    ``queued`` is True when the call was queued (or, with ``replace=True``,
    rescheduled), False when a copy with the same id was already queued or
    running and was kept (deduplicated: nothing new will run) or when a
    ``@task(unique_for=...)`` call succeeded within that window (``refused`` says which,
    naming the id), and None while
    that is not known: inside ``transaction.atomic()`` the send waits for the
    commit and ``queued`` is filled in then (it stays None after a rollback),
    and in ``EAGER`` mode nothing is queued at all.
    """

    queued: bool | None
    #: Why the call was not queued (naming its id), or None: queued, or not known yet.
    refused: str | None

    def __new__(
        cls,
        id: str,
        queued: bool | None = None,
        queue: Queue | None = None,
        known: Outcome | None = None,
    ) -> Enqueued:
        made = super().__new__(cls, id)
        made.queued = queued
        made.refused = None
        made._where = None if queue is None else (queue.backend.alias, queue.name)
        made._known = known
        return made

    def _set_code(self, code: int) -> Enqueued:
        """Fill in ``queued`` and ``refused`` from the enqueue script's code for this call:
        1 queued, 0 a copy with this id is queued or running, 2 refused by the task's
        ``unique_for`` window (a run of this id succeeded within it)."""
        self.queued = code == 1
        if code == 0:
            self.refused = f"task {str(self)!r} is already queued or running; that copy was kept"
        elif code == 2:
            self.refused = (
                f"task {str(self)!r} succeeded within its unique_for window; not queued again"
            )
        return self

    def __repr__(self) -> str:
        return f"Enqueued({str(self)!r}, queued={self.queued!r})"
