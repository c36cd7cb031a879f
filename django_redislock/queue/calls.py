"""How each queue operation is sent: validated ARGV for one script and its reply parser.

:class:`QueueCalls` builds a :class:`Call` per operation; :class:`~.queue.Queue`
runs it on the blocking client or, for the ``*_async`` twins, on the asyncio
client. Building the request and reading the reply in one place means the sync
and async APIs cannot drift apart, and that every argument is checked before
anything reaches Redis.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, TypeVar

from ..calls.direct import DirectSender
from ..calls.requests import request_key as new_request_key
from ..calls.script import Prepared, script
from ..connections import ROUTED_ERRORS
from ..exceptions import InvalidArgument
from ..validation import check_count, check_id, check_ids, check_seconds
from .arguments import (
    Cursor,
    TaskRef,
    ack_refs,
    backoff_delay,
    claim_refs,
    cursor_of,
    enqueue_args,
    parse_flags,
)
from .enqueue_calls import EnqueueMixin
from .history import function_of, worker_id
from .keys import QueueKeys
from .priority import DEFAULT_PRIORITY
from .records import (
    DEAD,
    DELAYED,
    IN_FLIGHT,
    READY,
    Call,
    Claim,
    Entry,
    Task,
    micros,
    parse_claim,
    parse_tasks,
)
from .serializers import get_serializer
from .stats import SUMMARY_SCRIPT, QueueStats, summary_extra_keys
from .workflows import retry_extras

if TYPE_CHECKING:
    from ..backends.redis import RedisQueueBackend

R = TypeVar("R")
#: Retry outcomes, from the retry script's reply codes.
RETRY_RESULTS = {0: "lost", 1: "retried", 2: "dead"}
#: The outcomes a retry may end a task with instead of a failure (history, dead letter).
FINAL_OUTCOMES = ("cancelled", "expired")
#: The zset each listable state lives in (index into the scripts' KEYS).
STATE_SETS = {READY: 1, DELAYED: 1, IN_FLIGHT: 2, DEAD: 3}
#: Payload bytes one claim returns at most (beyond its first task): bounds a claim's reply.
MAX_CLAIM_BYTES = 16 * 1024 * 1024


class QueueCalls(QueueKeys, EnqueueMixin):
    """A queue's keys (:class:`~.keys.QueueKeys`), its serializer and the builders of its calls
    (the enqueue senders are :class:`~.enqueue_calls.EnqueueMixin`'s)."""

    def __init__(self, backend: RedisQueueBackend, name: str) -> None:
        super().__init__(backend, name)
        self.serializer = get_serializer(backend.options["SERIALIZER"])
        #: (client, the prepared enqueue call, its DirectSender or None) for send_entries
        self._enqueue_head: tuple[Any, Prepared, DirectSender | None] | None = None
        #: (client, the prepared call, its DirectSender, the request's prefix) for send_one
        self._one_head: tuple[Any, Prepared, DirectSender | None, bytes | None] | None = None
        self._prepared: dict[tuple[str, int], Prepared] = {}

    def request_key(self) -> str:
        """A fresh key for one call that must be safe to resend (claims, replacing enqueues).

        The script records its answer there (for about a minute, or a lease); a resend of
        the same request (redis-py retries a command after a connection error or timeout)
        finds it and answers the same without doing the work twice.
        """
        return new_request_key(self.backend, f"q:{self.name}")

    def _run(self, call: Call[R]) -> R:
        """Send ``call`` on the blocking client, prepared once per script and client (see
        :class:`~django_redislock.calls.script.Prepared`: a worker claims through it)."""
        client, extra = self.backend.client, len(call.extra_keys)
        prepared = self._prepared.get((call.script, extra))
        if prepared is None or prepared.client is not client:
            direct = bool(self.backend.options.get("DIRECT_SENDER", True))
            prepared = script(call.script).prepare(client, self.script_keys, direct, extra)
            self._prepared[call.script, extra] = prepared
        try:  # a plain try, not backend.errors(): this is the hot path of every operation
            reply = prepared([*call.extra_keys, *call.args])
        except ROUTED_ERRORS:  # node errors, error replies: errors() sorts them
            with self.backend.errors():
                raise
        return call.parse(reply)

    async def _arun(self, call: Call[R]) -> R:
        keys = [*self.script_keys, *call.extra_keys]
        try:
            reply = await script(call.script).run_async(
                self.backend.async_client(), keys, call.args
            )
        except ROUTED_ERRORS:  # node errors, error replies: errors() sorts them
            with self.backend.errors():
                raise
        return call.parse(reply)

    def backoff(
        self,
        attempts: int,
        base: float | None = None,
        cap: float | None = None,
        jitter: bool | None = None,
    ) -> float:
        """The retry delay after ``attempts`` runs (:func:`.arguments.backoff_delay`)."""
        return backoff_delay(self.backend.options, attempts, base, cap, jitter)

    def _lease_micros(self, lease: float | None) -> int:
        seconds = self.backend.options["VISIBILITY_TIMEOUT"] if lease is None else lease
        return micros(check_seconds(seconds, "lease", allow_zero=False))

    # -- one builder per script ----------------------------------------------------------

    def _enqueue_call(
        self, entries: list[Entry], replace: bool, priority: int = DEFAULT_PRIORITY
    ) -> Call[list[bool]]:
        """The enqueue request (a replacing one carries a request key: safe to resend)."""
        extra = (self.rates_key, self.request_key()) if replace else (self.rates_key,)
        return Call("queue_enqueue", enqueue_args(entries, replace, priority), parse_flags, extra)

    def _claim_call(
        self,
        count: int,
        lease: float | None,
        ack: Iterable[TaskRef],
        start: bool = True,
        done_request: str | None = None,
    ) -> Call[Claim]:
        check_count(count, allow_zero=True)
        lease_us = self._lease_micros(lease)
        options = self.backend.options
        head = [count, lease_us, options["RECOVERY_BATCH"], options["MAX_ATTEMPTS"]]
        args = [*head, "1" if start else "0", MAX_CLAIM_BYTES, *ack_refs(list(ack), "ack")]

        def parse(reply: list[Any]) -> Claim:
            return parse_claim(self.name, reply, self.serializer.loads, lease_us, request)

        request = self.request_key()
        extra: tuple[str, ...] = (self.flow_key, request, self.unique_key, *self.group_keys)
        if done_request is not None:
            extra += (self._own_key(done_request),)
        return Call("queue_pop", args, parse, extra)

    def _own_key(self, key: str) -> str:
        """``key`` if it is a request key of this queue (so a script only ever touches those)."""
        head = self.backend.key(f"q:{self.name}", "req:")
        if not isinstance(key, str) or not key.startswith(head):
            raise InvalidArgument(
                f"done_request must be a Claim.request of this queue, got {key!r}"
            )
        return key

    def _list_call(self, state: str, count: int, after: Cursor = None) -> Call[list[Task]]:
        if state not in STATE_SETS:
            raise InvalidArgument(f"state must be one of {', '.join(STATE_SETS)}, got {state!r}")
        check_count(count, allow_zero=False)
        cursor = cursor_of(after)
        score, id = cursor or (0, "")
        # Paged by (score, id), not by score alone: tasks that share a score (a batch
        # requeued at once) are neither skipped nor repeated. Preview 0 = whole payloads.
        args = [state, "first" if cursor is None else "after", score, id, count, 0]

        def parse(reply: list[Any]) -> list[Task]:
            # queue_page sends seven fields per task; the fifth (the payload size) is not
            # kept, the seventh is the priority level
            rows = reply[8:]
            flat = [value for i, value in enumerate(rows) if i % 7 < 4 or i % 7 == 5]
            tasks = parse_tasks(self.name, flat, self.serializer.loads, lambda _score: state)
            for task, level in zip(tasks, rows[6::7], strict=True):
                task.lease_deadline = task.score if state == IN_FLIGHT else None
                task.priority = int(level)
            return tasks

        return Call("queue_page", args, parse)

    def _retry_call(
        self,
        task: Task,
        delay: float | None,
        error: str,
        max_attempts: int | None,
        runtime: float | None = None,
        *,
        final: str = "",
    ) -> Call[str]:
        """``final`` ("cancelled", "expired"): the run ends the task that way, not as a failure."""
        if not isinstance(task, Task):
            raise InvalidArgument(f"task must be a Task returned by pop(), got {task!r}")
        seconds = (
            self.backoff(task.attempts)
            if delay is None
            else check_seconds(delay, "delay", allow_zero=True)
        )
        limit = self.backend.options["MAX_ATTEMPTS"] if max_attempts is None else max_attempts
        check_count(limit, "max_attempts", allow_zero=False)
        if not isinstance(error, str):
            raise InvalidArgument(f"error must be a string, got {type(error).__name__}")
        took = "" if runtime is None else micros(check_seconds(runtime, "runtime", allow_zero=True))
        args = [task.id, task.claim, micros(seconds), error[:4000], limit, worker_id(), took]
        if final and final not in FINAL_OUTCOMES:
            raise InvalidArgument(f"final must be one of {FINAL_OUTCOMES}, got {final!r}")
        history = (self.history_key, self.history_index_key, self.runs_failed_key, self.cancel_key)
        extra: tuple[str, ...] = (*history, *self.group_keys)
        args += [final, function_of(task)]
        member = retry_extras(self, task)  # type: ignore[arg-type]
        if member is not None:  # a workflow member: its death ends its step (.workflows)
            extra += member[0]
            args += member[1]
        return Call("queue_retry", args, lambda reply: RETRY_RESULTS[int(reply)], extra)

    def _ack_call(self, tasks: TaskRef | Iterable[TaskRef]) -> Call[int]:
        extra = (self.request_key(), self.unique_key, *self.group_keys)
        return Call("queue_ack", ack_refs(tasks), int, extra)

    def _release_call(self, tasks: Iterable[Task]) -> Call[int]:
        tasks = list(tasks)
        if not all(isinstance(task, Task) for task in tasks):
            raise InvalidArgument("tasks must be Tasks returned by pop()")
        args = [value for task in tasks for value in (task.id, task.claim, task.score)]
        return Call("queue_release", args, int)

    def _extend_call(
        self, tasks: TaskRef | Iterable[TaskRef], lease: float | None, start: int | None = None
    ) -> Call[bool]:
        refs = [tasks] if isinstance(tasks, (Task, str)) else list(tasks)
        mark = "" if start is None else str(start)
        args = [self._lease_micros(lease), mark, *claim_refs(refs)]

        def parse(reply: list[Any]) -> bool:
            for ref, flag in zip(refs, reply[1:], strict=False):
                if isinstance(ref, Task):
                    ref.lease_deadline = int(reply[0])
                    if int(flag) == 2:  # asked to cancel (see queue_cancel.lua)
                        ref.cancel_requested = True
            return all(reply[1:])

        return Call("queue_extend", args, parse, (self.cancel_key,))

    def _start_call(self, task: Task, lease: float | None, max_attempts: int | None) -> Call[bool]:
        if not isinstance(task, Task):
            raise InvalidArgument(f"task must be a Task returned by claim(), got {task!r}")
        limit = (
            0
            if max_attempts is None
            else check_count(max_attempts, "max_attempts", allow_zero=False)
        )
        return self._extend_call(task, lease, limit)

    def _dequeue_call(self, id: str, score: int) -> Call[bool]:
        if isinstance(score, bool) or not isinstance(score, (int, float)):
            raise InvalidArgument(f"score must be a number, got {type(score).__name__}")
        return Call("queue_dequeue", [check_id(id), int(score)], bool)

    def _get_call(self, id: str) -> Call[Task | None]:
        def parse(reply: list[Any]) -> Task | None:
            if not reply:
                return None
            now, where = int(reply[0]), int(reply[1])
            [task] = parse_tasks(self.name, [id, *reply[2:6]], self.serializer.loads, str)
            task.priority = int(reply[6])
            task.enqueued_at = int(reply[7]) if int(reply[7]) >= 0 else None
            default = READY if task.score <= now else DELAYED
            task.state = {2: IN_FLIGHT, 3: DEAD}.get(where, default)
            task.lease_deadline = task.score if where == 2 else None
            return task

        return Call("queue_get", [check_id(id)], parse)

    def _requeue_call(self, ids: Iterable[str] | None, limit: int) -> Call[int]:
        chosen = [] if ids is None else check_ids(ids)
        return Call(
            "queue_requeue_dead", [check_count(limit, "limit", allow_zero=False), *chosen], int
        )

    def _purge_call(self, chunk: int) -> Call[tuple[int, int]]:
        check_count(chunk, "chunk", allow_zero=False)
        return Call(
            "queue_purge", [chunk], lambda reply: (int(reply[0]), int(reply[1])), self.group_keys
        )

    def _stats_call(self) -> Call[dict[str, Any]]:
        def parse(reply: list[Any]) -> dict[str, Any]:
            return QueueStats.from_reply(self.name, reply).as_dict()

        return Call(SUMMARY_SCRIPT, [], parse, summary_extra_keys(self))
