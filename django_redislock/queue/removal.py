"""Cancelling and removing a task by id: :meth:`Queue.cancel` and :meth:`Queue.remove`.

A workflow member removed while it waits in the queue must end its step in the script that
removes it: otherwise its chain, chord or dependents wait for an end that never comes, and
the workflow stays RUNNING until its hash expires. Only the member's payload says which
workflow it belongs to, so both first read the task (:meth:`Queue.get`, one round trip) and
pass its workflow's keys; the script removes nothing (reply -1, ``"changed"``) when the
queued copy is no longer the one read (its enqueue time changed), and the task is read
again, :data:`READS` times at most.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

from ..exceptions import InvalidArgument
from ..validation import check_id
from .history import worker_id
from .records import Call, Task
from .workflows import removal_extras

R = TypeVar("R")
#: How many times a cancel or remove reads the task before it gives up the workflow check
#: (each read found another copy queued: replaced faster than it can be read).
READS = 5
#: Cancel outcomes, from the cancel script's reply codes (see :meth:`Queue.cancel`);
#: "changed": the queued copy is not the one read (read it again).
CANCEL_RESULTS = {0: "finished", 1: "removed", 2: "requested", -1: "changed"}
#: Remove outcomes, from the remove script's reply codes.
REMOVE_RESULTS = {0: "unknown", 1: "removed", -1: "changed"}


class RemovalMixin:
    """The cancel and remove methods of :class:`~django_redislock.queue.Queue`."""

    name: str
    cancel_key: str
    history_key: str
    history_index_key: str
    runs_failed_key: str
    group_keys: tuple[str, ...]

    if TYPE_CHECKING:  # provided by QueueCalls and Queue
        backend: Any

        def _run(self, call: Call[R]) -> R: ...

        async def _arun(self, call: Call[R]) -> R: ...

        def get(self, id: str) -> Task | None: ...

        async def get_async(self, id: str) -> Task | None: ...

    def cancel(self, id: str, reason: str = "cancelled") -> str:
        """Cancel the task ``id``: ``"removed"``, ``"requested"`` or ``"finished"``.

        A ready or delayed task is removed at once (``"removed"``; its history shows
        ``cancelled`` and a stored result becomes ``CANCELLED``). A task in flight is
        asked to stop (``"requested"``): the request is kept in Redis and the worker
        running it reads it with its next lease renewal (within a third of its lease),
        stops the run (docs/workers.md, "Cancelling a running task") and dead-letters
        it as cancelled; a worker that is briefly offline reads it when it is back, and
        a run whose worker died is cancelled by the worker that runs it next.
        ``"finished"``: nothing to cancel (it finished, was dead-lettered, or is unknown);
        nothing changed. A queued workflow member's step ends as failed in the same
        script (its chain stops, its chord follows its ``allow_failure``, its dependents
        are cancelled): the task is read first to learn its workflow (one more round trip).
        """
        for _ in range(READS):
            outcome = self._run(self._cancel_call(id, reason, self.get(id)))
            if outcome != "changed":
                return outcome
        return self._run(self._cancel_call(id, reason, checked=False))

    async def cancel_async(self, id: str, reason: str = "cancelled") -> str:
        """The asyncio twin of :meth:`cancel`."""
        for _ in range(READS):
            outcome = await self._arun(self._cancel_call(id, reason, await self.get_async(id)))
            if outcome != "changed":
                return outcome
        return await self._arun(self._cancel_call(id, reason, checked=False))

    def remove(self, id: str) -> bool:
        """Delete a task in any state; True if it existed.

        A queued workflow member's step ends as failed in the same script, as with
        :meth:`cancel` (read first: one more round trip).
        """
        for _ in range(READS):
            outcome = self._run(self._remove_call(id, self.get(id)))
            if outcome != "changed":
                return outcome == "removed"
        return self._run(self._remove_call(id, checked=False)) == "removed"

    async def remove_async(self, id: str) -> bool:
        """The asyncio twin of :meth:`remove`."""
        for _ in range(READS):
            outcome = await self._arun(self._remove_call(id, await self.get_async(id)))
            if outcome != "changed":
                return outcome == "removed"
        return await self._arun(self._remove_call(id, checked=False)) == "removed"

    def _cancel_call(
        self, id: str, reason: str, seen: Task | None = None, checked: bool = True
    ) -> Call[str]:
        """Remove ``id`` if it is queued, else ask its worker to stop it; see :meth:`cancel`.

        ``seen``: the copy of it the caller read (None: none), whose workflow step the
        removal ends; ``"changed"`` when the queued copy is another one (unless not
        ``checked``: then removed as it is, no workflow step ended).
        """
        if not isinstance(reason, str):
            raise InvalidArgument(f"reason must be a string, got {type(reason).__name__}")
        tag = f"q:{self.name}"
        result, done = (self.backend.key(tag, part, check_id(id)) for part in ("result", "done"))
        keys: tuple[str, ...] = (
            self.cancel_key,
            result,
            done,
            self.history_key,
            self.history_index_key,
            self.runs_failed_key,
            *self.group_keys,
        )
        args = [id, f"TaskCancelled: {reason}"[:4000], worker_id()]
        if checked:
            member_keys, member_args = removal_extras(self, seen)  # type: ignore[arg-type]
            keys += member_keys
            args += member_args
        return Call("queue_cancel", args, lambda reply: CANCEL_RESULTS[int(reply)], keys)

    def _remove_call(self, id: str, seen: Task | None = None, checked: bool = True) -> Call[str]:
        """Delete ``id`` in any state: ``"removed"``, ``"unknown"``, ``"changed"`` (see
        :meth:`_cancel_call` for ``seen``)."""
        args: list[Any] = [check_id(id)]
        keys: tuple[str, ...] = self.group_keys
        if checked:
            member_keys, member_args = removal_extras(self, seen)  # type: ignore[arg-type]
            keys += member_keys
            args += member_args
        return Call("queue_remove", args, lambda reply: REMOVE_RESULTS[int(reply)], keys)
