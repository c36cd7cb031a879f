"""A named queue: enqueue, top, pop and dequeue, plus leases, retries and dead letters.

Every operation is one Lua script: one round trip, atomic, on one cluster slot,
with no lock around it (the script is the unit of atomicity). Each
blocking method has an ``*_async`` twin that sends the same request through
the asyncio client.

Keys (all share the hash tag ``{q:<name>}``)::

    <prefix>:{q:<name>}:pending    zset  id -> due time (µs)        ready + delayed
    <prefix>:{q:<name>}:inflight   zset  id -> lease deadline (µs)   claimed by a worker
    <prefix>:{q:<name>}:dead       zset  id -> time of death (µs)    dead letters
    <prefix>:{q:<name>}:payload    hash  id -> serialized payload
    <prefix>:{q:<name>}:attempts   hash  id -> runs started
    <prefix>:{q:<name>}:errors     hash  id -> last error
    <prefix>:{q:<name>}:signal     list  wake-up tokens for idle workers
    <prefix>:{q:<name>}:claims     hash  id -> claim token of an in-flight task (and
                                         whether its run was recorded as started)
    <prefix>:{q:<name>}:flow       hash  pause and rate limit (see :mod:`.flow`)
    <prefix>:{q:<name>}:req:<hex>  list  the answer of one claim, ack or replacing
                                         enqueue, for a resend of that request

Every claim of a task gets its own token (drawn from a counter that never goes
back). ``ack``, ``retry``, ``release`` and ``extend_lease`` of a :class:`Task`
act only while the claim it carries is current, so a worker whose lease expired,
or whose task was replaced (``enqueue(id, replace=True)``), changes nothing.
A bare id names whatever claim of that id is current.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..validation import check_count, check_id, check_seconds
from .arguments import Cursor, TaskRef, enqueue_args
from .calls import QueueCalls
from .flow import FlowMixin
from .groups import GroupInfo
from .groups import groups as list_groups
from .priority import DEFAULT_PRIORITY, check_priority, enqueue_flag
from .records import READY, Claim, Entry, Task, micros
from .removal import RemovalMixin


class Queue(QueueCalls, FlowMixin, RemovalMixin):
    """One named queue; build it with ``queues["default"].queue("orders")``."""

    def __repr__(self) -> str:
        return f"<Queue {self.name!r} alias={self.backend.alias!r}>"

    # -- the four basic operations: enqueue / top / pop / dequeue -------------------------

    def enqueue(
        self,
        id: str,
        payload: Any = None,
        delay: float = 0,
        replace: bool = False,
        priority: int = DEFAULT_PRIORITY,
    ) -> bool:
        """Queue ``id`` to be due in ``delay`` seconds; False if it is already queued.

        One entry per id: while ``id`` is ready, delayed or in flight a
        second enqueue keeps the first copy and returns False, unless
        ``replace=True`` reschedules it with the new payload, delay and priority.
        ``priority`` is a level from 0 (the default, lowest) to 9: due tasks of a
        higher level are claimed first (docs/queue.md, "Priorities").
        """
        check_id(id)  # prepare()'s checks, in its order, without building an Entry
        due_in = micros(check_seconds(delay, "delay", allow_zero=True))
        flag = "1" if replace else "0"
        if type(priority) is not int or priority:
            flag = enqueue_flag(replace, check_priority(priority))
        return self.send_entries([flag, id, due_in, self.encode(payload)])[0]

    async def enqueue_async(
        self,
        id: str,
        payload: Any = None,
        delay: float = 0,
        replace: bool = False,
        priority: int = DEFAULT_PRIORITY,
    ) -> bool:
        """The asyncio twin of :meth:`enqueue`."""
        entry = self.prepare(id, payload, delay)
        check_priority(priority)
        await self.backend.register_queue_async(self.name)
        return (await self._arun(self._enqueue_call([entry], replace, priority)))[0]

    def enqueue_many(
        self,
        items: Iterable[Any],
        delay: float = 0,
        replace: bool = False,
        batch_size: int = 1000,
        priority: int = DEFAULT_PRIORITY,
    ) -> list[bool]:
        """Queue ``(id, payload)`` or ``(id, payload, delay)`` items, one round trip per batch.

        Every item is validated and serialized before the first batch is sent, so
        a bad item leaves Redis untouched. Returns one flag per item, as
        :meth:`enqueue` would (a repeated id in the same call keeps the first).
        Every item gets ``priority``.
        """
        check_priority(priority)
        batches = self.batches(items, delay, batch_size)
        return [
            flag
            for batch in batches
            for flag in self.send_entries(enqueue_args(batch, replace, priority))
        ]

    async def enqueue_many_async(
        self,
        items: Iterable[Any],
        delay: float = 0,
        replace: bool = False,
        batch_size: int = 1000,
        priority: int = DEFAULT_PRIORITY,
    ) -> list[bool]:
        """The asyncio twin of :meth:`enqueue_many`."""
        check_priority(priority)
        batches = self.batches(items, delay, batch_size)
        if batches:
            await self.backend.register_queue_async(self.name)
        flags: list[bool] = []
        for batch in batches:
            sent = await self._arun(self._enqueue_call(batch, replace, priority))
            flags.extend(sent)
        return flags

    def enqueue_prepared(
        self, entries: list[Entry], replace: bool = False, priority: int = DEFAULT_PRIORITY
    ) -> list[bool]:
        """Send entries built by :meth:`prepare` (the ``@task`` registry validates early)."""
        return self.send_entries(enqueue_args(entries, replace, priority))

    def top(self, count: int = 1) -> list[Task]:
        """Due tasks, oldest first, without claiming them."""
        return self._run(self._list_call(READY, count, None))

    async def top_async(self, count: int = 1) -> list[Task]:
        """The asyncio twin of :meth:`top`."""
        return await self._arun(self._list_call(READY, count, None))

    def pop(self, count: int = 1, lease: float | None = None) -> list[Task]:
        """Claim up to ``count`` due tasks, oldest first, under a lease of ``lease`` seconds.

        Claimed tasks move to the in-flight set until :meth:`ack`, :meth:`retry`
        or their lease deadline. The same script first hands expired leases back
        to the ready set (at most ``OPTIONS['RECOVERY_BATCH']`` per call), so the
        tasks of a dead worker come back without any daemon. ``lease`` defaults
        to ``OPTIONS['VISIBILITY_TIMEOUT']``.
        """
        return self.claim(check_count(count, allow_zero=False), lease).tasks

    async def pop_async(self, count: int = 1, lease: float | None = None) -> list[Task]:
        """The asyncio twin of :meth:`pop`."""
        return (await self.claim_async(check_count(count, allow_zero=False), lease)).tasks

    def claim(
        self,
        count: int = 1,
        lease: float | None = None,
        ack: Iterable[TaskRef] = (),
        start: bool = True,
        done_request: str | None = None,
    ) -> Claim:
        """:meth:`pop` that first acks ``ack`` and also reports when work is next due.

        The claim is safe to resend: its answer is kept under ``Claim.request`` for
        60 s; pass that as ``done_request`` to the next claim to free it at once.

        With ``start=False`` the claim costs no attempt: the caller records each
        run with :meth:`start` (or :meth:`retry` counts it), and a task whose lease
        expires before its run was recorded comes back without a charge, marked
        ``suspect`` (the ``drain_queue`` worker records a suspect's run before it
        runs, so a task that kills its worker is charged from then on).
        """
        return self._run(self._claim_call(count, lease, ack, start, done_request))

    async def claim_async(
        self,
        count: int = 1,
        lease: float | None = None,
        ack: Iterable[TaskRef] = (),
        start: bool = True,
        done_request: str | None = None,
    ) -> Claim:
        """The asyncio twin of :meth:`claim`."""
        return await self._arun(self._claim_call(count, lease, ack, start, done_request))

    def start(
        self, task: Task, lease: float | None = None, max_attempts: int | None = None
    ) -> bool:
        """Record that the run of a task claimed with ``start=False`` begins now.

        Counts one attempt (once per claim), moves its lease to ``lease`` seconds
        from now, and keeps ``max_attempts`` (default: ``OPTIONS['MAX_ATTEMPTS']``)
        with the claim, so a lease that expires on this run dead-letters the task
        by its own limit. False when the claim is no longer current: do not run it.
        """
        return self._run(self._start_call(task, lease, max_attempts))

    async def start_async(
        self, task: Task, lease: float | None = None, max_attempts: int | None = None
    ) -> bool:
        """The asyncio twin of :meth:`start`."""
        return await self._arun(self._start_call(task, lease, max_attempts))

    def dequeue(self, id: str, score: int) -> bool:
        """Remove a queued task only if its score is still ``score`` (compare and delete).

        False when it is gone or was rescheduled since the caller read it.
        """
        return self._run(self._dequeue_call(id, score))

    async def dequeue_async(self, id: str, score: int) -> bool:
        """The asyncio twin of :meth:`dequeue`."""
        return await self._arun(self._dequeue_call(id, score))

    # -- leases ---------------------------------------------------------------------------

    def ack(self, tasks: TaskRef | Iterable[TaskRef]) -> int:
        """Finish claimed tasks for good; returns how many were acknowledged.

        A :class:`Task` is acknowledged only while the claim it carries is current
        (not after its lease expired and it was handed out again, nor after a newer
        copy replaced it); a bare id acknowledges whatever claim of it is current.
        """
        return self._run(self._ack_call(tasks))

    async def ack_async(self, tasks: TaskRef | Iterable[TaskRef]) -> int:
        """The asyncio twin of :meth:`ack`."""
        return await self._arun(self._ack_call(tasks))

    def retry(
        self,
        task: Task,
        delay: float | None = None,
        error: str = "",
        max_attempts: int | None = None,
        runtime: float | None = None,
        *,
        final: str = "",
    ) -> str:
        """Run a failed claimed task again later, or dead-letter it after ``max_attempts``.

        ``delay`` defaults to :meth:`backoff` (exponential with jitter);
        ``max_attempts`` to ``OPTIONS['MAX_ATTEMPTS']``. Returns ``"retried"``,
        ``"dead"`` or ``"lost"``: the claim is no longer current (its lease expired,
        or a newer copy was queued with ``replace=True``) and nothing changed.
        The failed run joins the task's history (:mod:`.history`), with ``runtime``
        (seconds the run took) when given. ``final`` (``"cancelled"`` or ``"expired"``)
        dead-letters it at once with that outcome in its history instead.
        """
        return self._run(self._retry_call(task, delay, error, max_attempts, runtime, final=final))

    async def retry_async(
        self,
        task: Task,
        delay: float | None = None,
        error: str = "",
        max_attempts: int | None = None,
        runtime: float | None = None,
        *,
        final: str = "",
    ) -> str:
        """The asyncio twin of :meth:`retry`."""
        return await self._arun(
            self._retry_call(task, delay, error, max_attempts, runtime, final=final)
        )

    def release(self, tasks: Iterable[Task]) -> int:
        """Give claimed, unstarted tasks back in their old place; the claim is not an attempt.

        Only tasks whose claim is still current are given back; returns how many.
        """
        return self._run(self._release_call(tasks))

    async def release_async(self, tasks: Iterable[Task]) -> int:
        """The asyncio twin of :meth:`release`."""
        return await self._arun(self._release_call(tasks))

    def extend_lease(self, tasks: TaskRef | Iterable[TaskRef], lease: float | None = None) -> bool:
        """Move the lease of claimed tasks to ``lease`` seconds from now; False if one was lost.

        Lost: the task is no longer in flight under the claim its :class:`Task`
        carries (a bare id: under any claim). A worker that sees False must not
        start the tasks of that claim: another worker may be running them.
        """
        return self._run(self._extend_call(tasks, lease))

    async def extend_lease_async(
        self, tasks: TaskRef | Iterable[TaskRef], lease: float | None = None
    ) -> bool:
        """The asyncio twin of :meth:`extend_lease`."""
        return await self._arun(self._extend_call(tasks, lease))

    # -- operators -------------------------------------------------------------------------

    def get(self, id: str) -> Task | None:
        """The task ``id`` in whatever state it is, or None."""
        return self._run(self._get_call(id))

    async def get_async(self, id: str) -> Task | None:
        """The asyncio twin of :meth:`get`."""
        return await self._arun(self._get_call(id))

    def tasks(self, state: str = READY, count: int = 50, after: Cursor = None) -> list[Task]:
        """A page of tasks in ``state``, by score then id; pass the last task seen as ``after``.

        Keyset pagination: no id list is loaded, a page costs O(log N + count)
        whatever the queue holds, and tasks that share a score are neither skipped
        nor repeated. ``state`` is one of ``ready``, ``delayed``, ``in_flight``, ``dead``.
        """
        return self._run(self._list_call(state, count, after))

    async def tasks_async(
        self, state: str = READY, count: int = 50, after: Cursor = None
    ) -> list[Task]:
        """The asyncio twin of :meth:`tasks`."""
        return await self._arun(self._list_call(state, count, after))

    def requeue_dead(self, ids: Iterable[str] | None = None, limit: int = 1000) -> int:
        """Move dead tasks (``ids``, or the ``limit`` oldest) back to ready with fresh attempts."""
        return self._run(self._requeue_call(ids, limit))

    async def requeue_dead_async(self, ids: Iterable[str] | None = None, limit: int = 1000) -> int:
        """The asyncio twin of :meth:`requeue_dead`."""
        return await self._arun(self._requeue_call(ids, limit))

    def purge(self, chunk: int = 1000) -> int:
        """Delete every task, ``chunk`` at a time so Redis is never blocked; returns how many."""
        call = self._purge_call(chunk)
        deleted, left = self._run(call)
        for _ in range(left // chunk + 3):
            if not left:
                break
            done, left = self._run(call)
            deleted += done
        return deleted

    async def purge_async(self, chunk: int = 1000) -> int:
        """The asyncio twin of :meth:`purge`."""
        call = self._purge_call(chunk)
        deleted, left = await self._arun(call)
        for _ in range(left // chunk + 3):
            if not left:
                break
            done, left = await self._arun(call)
            deleted += done
        return deleted

    def groups(self, count: int = 200) -> list[GroupInfo]:
        """Up to ``count`` concurrency groups of this queue with admitted or held tasks:
        their admitted (ready or running) and held counts and limits (an operator's read:
        one script that scans the groups hash, never on a claim's path)."""
        return list_groups(self, count)

    def stats(self) -> dict[str, Any]:
        """Counts by state and the age in seconds of the oldest due task (no scans)."""
        return self._run(self._stats_call())

    async def stats_async(self) -> dict[str, Any]:
        """The asyncio twin of :meth:`stats`."""
        return await self._arun(self._stats_call())
