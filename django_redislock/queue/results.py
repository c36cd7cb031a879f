"""Results of ``@task(store_result=True)`` calls: one record per task id, next to its queue.

Keys (under the queue's hash tag ``{q:<name>}``, so the enqueue and the record's
reset are one atomic step, and a waiter's ``BLMOVE`` touches one cluster slot)::

    <prefix>:{q:<name>}:result:<id>  hash  gen, status, value, error (TTL: result_ttl)
    <prefix>:{q:<name>}:done:<id>    list  one wake-up token while the result is final

A call that stores its result carries ``{"result": {"gen": <hex>, "ttl": <s>}}``
in its payload. Its enqueue and ``result_mark.lua`` go in one ``MULTI``: when the
call was queued (not deduplicated), the record restarts as READY under the new
generation, so a reused id (``replace=True``, a dedup id, a periodic id) never
shows a waiter the previous run's result. The worker stores the outcome with
``result_store.lua`` (one round trip, only for these calls), which refuses to
overwrite a newer generation. ``result_read.lua`` reads the record, or, before
there is an outcome, the call's state in the queue.
"""

from __future__ import annotations

import enum
import logging
import os
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import redis

from ..calls.batch import Batch
from ..calls.script import script
from ..exceptions import MissingDependency, UndecodablePayload
from ..validation import MAX_SECONDS
from ..wire import redis_py_version, to_text
from .records import Call, Task
from .workflows import record_success, record_success_async

if TYPE_CHECKING:
    from .queue import Queue

logger = logging.getLogger("django_redislock.results")
R = TypeVar("R")

#: The payload key that asks the worker to store the outcome.
MARKER = "result"
#: The redis-py release whose RedisCluster runs a MULTI (a transaction on one slot).
CLUSTER_MULTI = (6, 1)
#: Longest stored error text (the head and the last lines of the traceback).
MAX_ERROR = 4000


class ResultStatus(str, enum.Enum):
    """Where a call is; the first four are the values of Django's ``TaskResultStatus``."""

    READY = "READY"  #: queued, delayed, or waiting for a retry
    RUNNING = "RUNNING"  #: claimed by a worker
    SUCCESSFUL = "SUCCESSFUL"  #: returned; the value is stored
    FAILED = "FAILED"  #: dead-lettered (no attempts left, or it can never run)
    UNKNOWN = "UNKNOWN"  #: no record and not in the queue: expired, removed, or never stored
    CANCELLED = "CANCELLED"  #: cancelled (``Enqueued.cancel()``) before or while it ran

    def __str__(self) -> str:
        return self.value

    @property
    def final(self) -> bool:
        """True when waiting longer cannot change the answer."""
        return self in FINAL


FINAL = frozenset(
    {ResultStatus.SUCCESSFUL, ResultStatus.FAILED, ResultStatus.UNKNOWN, ResultStatus.CANCELLED}
)


@dataclass(frozen=True)
class Outcome:
    """One read of a result: its status, its value, the error text.

    A read from Redis keeps the stored bytes (``raw``) and decodes them only when
    the value is asked for (:meth:`decoded`), so ``status`` never fails on a value it
    does not need; an eager call's outcome holds the ``value`` itself.
    """

    status: ResultStatus
    value: Any = None
    error: str = ""
    raw: bytes | None = None

    def decoded(self, task_id: str, loads: Callable[[bytes], Any] | None) -> Any:
        """The value; raises ``UndecodablePayload`` when the stored bytes cannot be read."""
        if self.raw is None or loads is None:
            return self.value
        try:
            return loads(self.raw)
        except Exception as exc:
            raise UndecodablePayload(
                f"the stored result of task {task_id!r} cannot be decoded "
                f"({type(exc).__name__}: {exc})"
            ) from exc


def record_keys(queue: Queue, task_id: str) -> list[str]:
    """The result hash and the done list of ``task_id`` (the queue's hash tag)."""
    tag = f"q:{queue.name}"
    return [queue.backend.key(tag, "result", task_id), queue.backend.key(tag, "done", task_id)]


def marker(queue: Queue, ttl: float) -> dict[str, Any]:
    """The payload entry of a call that stores its result: a fresh generation and the TTL.

    Built before anything is sent, so it is also where a client that cannot send the
    enqueue's ``MULTI`` is refused (:func:`check_can_mark`), at the call.
    """
    check_can_mark(queue)
    return {"gen": os.urandom(8).hex(), "ttl": ttl}


def check_can_mark(queue: Queue) -> None:
    """Raise ``MissingDependency`` when the client cannot run the enqueue's ``MULTI``."""
    if queue.backend.is_cluster and redis_py_version() < CLUSTER_MULTI:
        raise MissingDependency(
            "store_result on a Redis Cluster sends a MULTI, which RedisCluster supports from "
            f"redis-py 6.1 (this is {redis.__version__}): pip install 'redis>=6.1'"
        )


def with_result_marker(fn: Any, queue: Queue, payload: dict[str, Any]) -> dict[str, Any]:
    """``payload`` with a :func:`marker` when ``fn`` (a ``TaskFunction``) stores results.

    For payloads encoded once and sent many times (a periodic schedule's): every tick
    has an id of its own, so one generation for all of them is enough.
    """
    ttl = fn.ttl_of_results(queue)
    return payload if ttl is None else {**payload, MARKER: marker(queue, ttl)}


def marker_of(task: Task) -> tuple[str, int] | None:
    """``(generation, ttl in ms)`` if ``task`` asks for its result to be stored, else None.

    A malformed entry (a payload written by hand, or by another version) is logged
    and ignored: the task still runs, nothing is stored.
    """
    payload = task.payload
    found = payload.get(MARKER) if isinstance(payload, dict) else None
    if found is None:
        return None
    gen = found.get("gen") if isinstance(found, dict) else None
    ttl = found.get("ttl") if isinstance(found, dict) else None
    if (
        isinstance(gen, str)
        and 0 < len(gen) <= 64
        and isinstance(ttl, (int, float))
        and not isinstance(ttl, bool)
        and 0 < ttl <= MAX_SECONDS
    ):
        return gen, max(1, int(ttl * 1000))
    logger.warning("task %s has a malformed %r entry %r: no result stored", task.id, MARKER, found)
    return None


def encode_value(queue: Queue, value: Any) -> tuple[bytes, str]:
    """``(serialized value, "")``, or ``(b"", error)`` when the value cannot be stored."""
    try:
        data = queue.serializer.dumps(value)
    except Exception as exc:
        return b"", f"the return value cannot be stored: {type(exc).__name__}: {exc}"
    limit = queue.backend.options["MAX_PAYLOAD_BYTES"]
    if len(data) > limit:
        return b"", (
            f"the return value is {len(data)} bytes serialized, over OPTIONS"
            f"['MAX_PAYLOAD_BYTES'] = {limit}: it was not stored"
        )
    return data, ""


def eager_outcome(queue: Queue, value: Any, ttl: float | None) -> Outcome:
    """What a worker would have stored for ``value`` (eager mode: nothing goes to Redis)."""
    if ttl is None:
        return Outcome(ResultStatus.UNKNOWN)
    data, problem = encode_value(queue, value)
    if problem:
        return Outcome(ResultStatus.FAILED, error=problem)
    return Outcome(ResultStatus.SUCCESSFUL, queue.serializer.loads(data))


def error_text(exc: BaseException) -> str:
    """``Type: message`` and the end of the traceback, at most :data:`MAX_ERROR` characters."""
    head = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    detail = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return f"{head}\n\n{detail[-(MAX_ERROR - len(head) - 2) :]}"[:MAX_ERROR]


def store_call(
    queue: Queue, task: Task, status: ResultStatus, value: bytes, error: str
) -> Call[int] | None:
    """The ``result_store`` request of a final outcome, or None when ``task`` stores none."""
    found = marker_of(task)
    if found is None:
        return None
    gen, ttl_ms = found
    args = [gen, str(status), value, error, ttl_ms]
    return Call("result_store", args, int, tuple(record_keys(queue, task.id)))


def success_call(queue: Queue, task: Task, value: Any) -> Call[int] | None:
    """The store of a run that returned ``value`` (or why it cannot be stored); None if none.

    Costs nothing for a task that does not store its result (a dict lookup).
    """
    payload = task.payload
    if not (isinstance(payload, dict) and MARKER in payload):
        return None
    data, problem = encode_value(queue, value)
    if problem:
        logger.error("task %s of %r: %s", task.id, queue.name, problem)
        return store_call(queue, task, ResultStatus.FAILED, b"", problem)
    return store_call(queue, task, ResultStatus.SUCCESSFUL, data, "")


def failure_call(
    queue: Queue, task: Task, exc: BaseException, status: ResultStatus = ResultStatus.FAILED
) -> Call[int] | None:
    """The store of the error that dead-lettered ``task`` (``status``: FAILED, or CANCELLED
    for a run that was cancelled); None if it stores none."""
    try:
        payload = task.payload
    except Exception:  # undecodable: its generation is unknown (result_read.lua says FAILED)
        return None
    if isinstance(payload, dict) and MARKER in payload:
        return store_call(queue, task, status, b"", error_text(exc))
    return None


def store_success(queue: Queue, task: Task, value: Any) -> None:
    """The worker's hook after a run returned: store its value (one round trip, if any).

    Called before the task is acked: if Redis fails here, the task is not acked and
    runs again.
    """
    call = success_call(queue, task, value)
    if call is not None:
        run(queue, call)
    record_success(queue, task, value)  # workflow members only (see .workflows)


def store_failure(
    queue: Queue, task: Task, exc: BaseException, status: ResultStatus = ResultStatus.FAILED
) -> None:
    """The worker's hook when a failure ends a task (dead-lettered): store the error."""
    call = failure_call(queue, task, exc, status)
    if call is not None:
        run(queue, call)


async def store_success_async(queue: Queue, task: Task, value: Any) -> None:
    """The asyncio twin of :func:`store_success` (for a worker running on an event loop)."""
    call = success_call(queue, task, value)
    if call is not None:
        await run_async(queue, call)
    await record_success_async(queue, task, value)  # workflow members only (see .workflows)


async def store_failure_async(
    queue: Queue, task: Task, exc: BaseException, status: ResultStatus = ResultStatus.FAILED
) -> None:
    """The asyncio twin of :func:`store_failure`."""
    call = failure_call(queue, task, exc, status)
    if call is not None:
        await run_async(queue, call)


def read_call(queue: Queue, task_id: str) -> Call[Outcome]:
    """The ``result_read`` request of ``task_id`` and the parser of its reply."""
    record = record_keys(queue, task_id)[0]

    def parse(reply: list[Any]) -> Outcome:
        status = ResultStatus(to_text(reply[0]))
        raw = reply[1] if status is ResultStatus.SUCCESSFUL else None
        return Outcome(status, error=to_text(reply[2]), raw=raw)

    payload, in_flight, dead, errors = (queue.script_keys[i] for i in (3, 1, 2, 5))
    return Call("result_read", [task_id], parse, (payload, in_flight, dead, errors, record))


def run(queue: Queue, call: Call[R]) -> R:
    """Run one of these scripts on the blocking client (``Call.extra_keys`` are all its keys)."""
    with queue.backend.errors():
        reply = script(call.script).run(queue.backend.client, call.extra_keys, call.args)
    return call.parse(reply)


async def run_async(queue: Queue, call: Call[R]) -> R:
    """The asyncio twin of :func:`run`."""
    client = queue.backend.async_client()
    with queue.backend.errors():
        return call.parse(await script(call.script).run_async(client, call.extra_keys, call.args))


def marked_sender(
    queue: Queue, payload: dict[str, Any], ttl: float, due_in: int, grouped: bool = False
) -> Callable[[list[Any]], list[int]]:
    """What sends one call's enqueue ARGV with its mark (``payload`` carries the marker).

    The record outlives the call's delay (``due_in``, µs) by ``ttl`` seconds. ``grouped``:
    the ARGV is ``queue_group_enqueue.lua``'s (a task of a concurrency group).
    """

    def send(args: list[Any]) -> list[int]:
        call_id, data = (args[2], args[4]) if grouped else (args[1], args[3])
        marks = [(call_id, data, payload[MARKER]["gen"])]
        return send_marked(queue, args, marks, ttl + due_in / 1e6, grouped=grouped)

    return send


def send_marked(
    queue: Queue,
    enqueue_args: list[Any],
    marks: list[tuple[str, bytes, str]],
    ttl: float,
    *,
    grouped: bool = False,
) -> list[int]:
    """Enqueue calls and (re)start their result records in one ``MULTI``; the enqueue's codes
    (1 queued, 0 a copy kept, 2 refused by its ``unique_for`` window).

    ``enqueue_args`` is the enqueue script's ARGV; ``marks`` holds ``(id, payload
    bytes, generation)`` per call. One round trip, like a plain enqueue.
    """
    backend = queue.backend
    check_can_mark(queue)
    backend.register_queue(queue.name)
    unique = enqueue_args[0][:1] == "u"  # refuses ids in their unique_for window
    replace = enqueue_args[0][int(unique) : int(unique) + 1] == "1"
    enqueue_keys = [
        *queue.script_keys,
        queue.rates_key,
        *([queue.unique_key] if unique else []),
        *([*queue.group_keys, queue.flow_key] if grouped else []),
        *([queue.request_key()] if replace else []),
    ]
    mark_keys = [queue.script_keys[3]]
    mark_args: list[Any] = [max(1, int(ttl * 1000))]
    for task_id, data, gen in marks:
        mark_keys += record_keys(queue, task_id)
        mark_args += [task_id, data, gen]
    batch = Batch(backend.client, transaction=True)
    batch.add("queue_group_enqueue" if grouped else "queue_enqueue", enqueue_keys, enqueue_args)
    batch.add("result_mark", mark_keys, mark_args)
    with backend.errors():
        # After NOSCRIPT (a new server, a SCRIPT FLUSH) the rest of the MULTI is sent again
        # from the first call that did not run. Enqueue NOSCRIPT: the mark found no payload
        # of this call, so both go again, still one MULTI. Mark NOSCRIPT: the enqueue ran,
        # the mark goes alone (it checks the payload again, so a call deduplicated or
        # already finished is left alone).
        flags, marked = batch.execute(resend="rest")
    for reply in (flags, marked):
        if isinstance(reply, Exception):
            raise reply
    return [int(flag) for flag in flags]
