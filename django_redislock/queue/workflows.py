"""The worker's side of workflows (chains, groups, chords, dependencies): see :mod:`.canvas`.

A task that belongs to a workflow carries ``{"wf": {...}}`` in its payload (:data:`MARK`):
the workflow id, its queue, the member's role (``"c"`` a chain step with a next step,
``"m"`` a group or chord member, ``"t"`` the last task: a chord callback, a chain's last
step, a single task), its index, the hash's time to live, and for a chain step the steps
still to come. Keys (the queue's hash tag, so every script runs on one slot)::

    <prefix>:{q:<name>}:wf:<workflow id>  hash  state, counters, member results (TTL)
    <prefix>:{q:<name>}:wfdeps            hash  who waits for whom (one per queue)

When a member returns, the worker sends ``workflow_done.lua`` (one round trip, before the
member's ack; in place of nothing else): it records the member's end once (``HSETNX`` on
the member's field is the guard, so a resend, or a second run after a lease expired, is not
counted again), stores its result, and queues what comes next: a chain's next step (its
payload built here, with the result as its first argument), a chord's callback when the
last member ended, the workflows that waited for this one. When a member is dead-lettered,
the retry script that buries it ends its step as failed in the same call
(``queue_retry.lua`` with the workflow keys, see :func:`retry_extras`).
"""

from __future__ import annotations

import io
import logging
import pickle
from typing import TYPE_CHECKING, Any

from ..calls.script import script
from ..exceptions import TaskFailed
from ..wire import to_text
from .records import Call, Task, decode_payload

if TYPE_CHECKING:
    from .queue import Queue

logger = logging.getLogger("django_redislock.workflows")

#: The payload key of a workflow member.
MARK = "wf"
#: The roles of a member (see the module doc).
CHAIN_STEP, MEMBER, LAST = "c", "m", "t"


def workflow_keys(queue: Queue, workflow_id: str) -> tuple[str, str]:
    """The workflow's hash and the queue's dependency hash."""
    tag = f"q:{queue.name}"
    return queue.backend.key(tag, "wf", workflow_id), queue.backend.key(tag, "wfdeps")


def mark_of(task: Task) -> dict[str, Any] | None:
    """The workflow entry of a claimed task's payload, or None (a dict lookup: the hot path)."""
    try:
        payload = task.payload
    except Exception:  # undecodable: it is buried by the worker, as any other
        return None
    if not isinstance(payload, dict):
        return None
    found = payload.get(MARK)
    if isinstance(found, dict) and isinstance(found.get("id"), str):
        return found
    return None


def done_call(queue: Queue, task: Task, mark: dict[str, Any], data: bytes) -> Call[int]:
    """The ``workflow_done`` request of a member that returned (``data``: its result)."""
    role = mark.get("role", LAST)
    index = int(mark.get("i", 0))
    next_id, next_payload = "", b""
    rest = mark.get("next") or []
    if role == CHAIN_STEP and rest:
        step, later = rest[0], rest[1:]
        value = queue.serializer.loads(data) if data else None
        next_id = step["id"]
        next_payload = queue.encode(
            {
                "task": step["task"],
                "args": [value, *step["args"]],
                "kwargs": step["kwargs"],
                MARK: {
                    **mark,
                    "role": CHAIN_STEP if later else LAST,
                    "i": index + 1,
                    "next": later,
                },
            }
        )
    args = [mark["id"], mark["ttl"], role, index, data, task.id, task.claim, next_id, next_payload]
    keys = (*queue.script_keys, *workflow_keys(queue, mark["id"]))
    return Call("workflow_done", args, int, keys)


def record_success(queue: Queue, task: Task, value: Any) -> None:
    """The worker's hook after a member returned ``value``: end its step (one round trip).

    Called before the member is acked: if Redis fails here, the member runs again, and
    its end is still counted once. A value that cannot be serialized is stored as None
    (logged).
    """
    mark = mark_of(task)
    if mark is None:
        return
    run_call(queue, done_call(queue, task, mark, encode_result(queue, task, value)))


async def record_success_async(queue: Queue, task: Task, value: Any) -> None:
    """The asyncio twin of :func:`record_success`."""
    mark = mark_of(task)
    if mark is None:
        return
    call = done_call(queue, task, mark, encode_result(queue, task, value))
    client = queue.backend.async_client()
    with queue.backend.errors():
        await script(call.script).run_async(client, call.extra_keys, call.args)


def encode_result(queue: Queue, task: Task, value: Any) -> bytes:
    try:
        return bytes(queue.serializer.dumps(value))
    except Exception as exc:
        logger.error("task %s of %r: its result cannot be stored (%s)", task.id, queue.name, exc)
        return bytes(queue.serializer.dumps(None))


def run_call(queue: Queue, call: Call[Any]) -> Any:
    with queue.backend.errors():
        reply = script(call.script).run(queue.backend.client, call.extra_keys, call.args)
    return call.parse(reply)


def retry_extras(queue: Queue, task: Task) -> tuple[tuple[str, ...], list[Any]] | None:
    """The keys and ARGV a workflow member adds to its retry call (None for other tasks)."""
    mark = mark_of(task)
    if mark is None:
        return None
    keys = workflow_keys(queue, mark["id"])
    return keys, [mark["id"], mark["ttl"], mark.get("role", LAST), int(mark.get("i", 0))]


def removal_extras(queue: Queue, seen: Task | None) -> tuple[tuple[str, ...], list[Any]]:
    """The keys and ARGV a removal script (``queue_cancel``, ``queue_remove``) adds for the
    copy of a task the caller read (``seen``, None when there was none).

    A queued member removed must end its step in the same script (else its workflow stays
    RUNNING until its hash expires), and only its payload says which workflow it belongs
    to: the caller reads it first, and the script removes nothing when the queued copy is
    no longer the one read (its enqueue time changed: reply -1, read again).
    """
    version = "-" if seen is None or seen.enqueued_at is None else str(seen.enqueued_at)
    mark = None if seen is None else stored_mark(queue, seen.raw_payload, seen.id)
    if mark is None:
        return (), [version]
    member = [mark["id"], mark["ttl"], mark.get("role", LAST), int(mark.get("i", 0))]
    return workflow_keys(queue, mark["id"]), [version, *member]


class _NoGlobals(pickle.Unpickler):
    """An unpickler that refuses every class and function: it cannot run code."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"{module}.{name}: not loaded here")


def stored_mark(queue: Queue, raw: Any, id: str) -> dict[str, Any] | None:
    """The workflow entry of a stored payload, read without running code, or None.

    The removal paths run in the admin's web process too, which never deserializes a
    pickle (see ``admin/rows.py``): a pickled payload is read by an unpickler that refuses
    every global, so one whose arguments need a class (a ``datetime``, a model) is read as
    no member and its removal ends nothing in its workflow. JSON is decoded as the queue
    does.
    """
    if raw is None:
        return None
    if queue.backend.options["SERIALIZER"] == "pickle":
        try:
            payload = _NoGlobals(io.BytesIO(bytes(raw))).load()
        except Exception:
            return None
    else:
        payload = decode_payload(raw, queue.serializer.loads, id)
    found = payload.get(MARK) if isinstance(payload, dict) else None
    if isinstance(found, dict) and isinstance(found.get("id"), str):
        return found
    return None


def packed_members(queue: Queue, ids: list[str]) -> tuple[list[str], dict[str, str]]:
    """For ``admin_task_action.lua``'s delete: the workflow keys to append to the queue's
    eleven keys and its four group keys, and the packed field of each of ``ids`` that is a
    workflow member (one ``HMGET`` of their payloads, read by :func:`stored_mark`)."""
    with queue.backend.errors():
        raws = queue.backend.client.hmget(queue.script_keys[3], ids) if ids else []
    keys: list[str] = []
    pairs: dict[str, int] = {}
    packed: dict[str, str] = {}
    for id, raw in zip(ids, raws, strict=True):
        mark = stored_mark(queue, raw, id)
        if mark is None:
            continue
        if mark["id"] not in pairs:
            keys += workflow_keys(queue, mark["id"])
            pairs[mark["id"]] = len(pairs) + 1
        fields = (pairs[mark["id"]], mark["id"], mark["ttl"], mark.get("role", LAST))
        packed[id] = " ".join(str(f) for f in (*fields, int(mark.get("i", 0))))
    return keys, packed


def chord_inputs(queue: Queue, workflow_id: str, count: int) -> list[Any]:
    """The results of a chord's members in member order (one ``HMGET``): a failed member's
    is a :class:`TaskFailed` (only when the chord allows failures)."""
    key = workflow_keys(queue, workflow_id)[0]
    fields = [f"{kind}:{i}" for i in range(count) for kind in ("s", "r", "e")]
    with queue.backend.errors():
        values = queue.backend.client.hmget(key, fields) if fields else []
    out: list[Any] = []
    for i in range(count):
        state, raw, error = values[3 * i : 3 * i + 3]
        if state is not None and to_text(state) == "ok" and raw is not None:
            out.append(
                queue.serializer.loads(bytes(raw) if isinstance(raw, bytes) else raw.encode())
            )
        else:
            text = "" if error is None else to_text(error)
            out.append(TaskFailed(f"member {i} failed: {text}", error=text))
    return out
