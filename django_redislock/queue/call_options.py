"""The per-call options of ``@task`` calls: ``eta``, ``expires``, and the async send.

``eta`` is turned into a delay when the call is queued. ``expires`` is written into the
call's envelope as an absolute time (:data:`EXPIRES`, seconds since the epoch): the worker
that claims the call compares it with its own clock before it starts the run
(:func:`expired`), so the check costs no round trip; an expired call is never started and
is dead-lettered as ``expired`` (its history, the admin's task page and a stored result
show why). Hosts' clocks must agree to within the precision that matters to you.
"""

from __future__ import annotations

import asyncio
import math
import time
from datetime import datetime
from datetime import timezone as dt_timezone
from typing import Any

from django.db import transaction
from django.utils import timezone

from ..exceptions import InvalidArgument, TaskExpired
from ..validation import check_seconds
from .handles import Enqueued
from .records import Entry, Task

#: The envelope key of a call's expiry time (seconds since the epoch).
EXPIRES = "expires"


def delay_of(delay: float, eta: datetime | None) -> float:
    """The delay of a call: ``delay`` seconds, or until ``eta`` (never both)."""
    if eta is None:
        return delay
    if delay:
        raise InvalidArgument("give delay or eta, not both")
    if not isinstance(eta, datetime):
        raise InvalidArgument(f"eta must be a datetime, got {type(eta).__name__}")
    if timezone.is_naive(eta):
        eta = timezone.make_aware(eta)
    return max(0.0, eta.timestamp() - time.time())


def expiry_of(expires: float | datetime | None, delay: float) -> float | None:
    """When a call expires (seconds since the epoch), from ``expires`` seconds or a datetime.

    A call that would expire before it is due is refused: it could never run.
    """
    if expires is None:
        return None
    now = time.time()
    if isinstance(expires, datetime):
        if timezone.is_naive(expires):
            expires = timezone.make_aware(expires)
        at = expires.timestamp()
    else:
        at = now + check_seconds(expires, "expires", allow_zero=False)
    if at <= now + delay:
        raise InvalidArgument("expires must come after the call is due (after its delay or eta)")
    return at


def expired(task: Task) -> TaskExpired | None:
    """Why ``task`` must not start (its expiry time passed), or None. One dict lookup."""
    payload = task.payload
    at = payload.get(EXPIRES) if isinstance(payload, dict) else None
    if at is None or not isinstance(at, (int, float)) or math.isnan(at) or time.time() < at:
        return None
    stamp = datetime.fromtimestamp(at, tz=dt_timezone.utc).isoformat(timespec="milliseconds")
    return TaskExpired(f"task {task.id} expired at {stamp} before a worker started it")


def in_transaction(using: str | None = None) -> bool:
    """True inside ``transaction.atomic()`` (checked without touching the database)."""
    return bool(transaction.get_connection(using).in_atomic_block)


async def send_async(fn: Any, payload: dict[str, Any]) -> Enqueued:
    """``delay`` over the asyncio client: one round trip, without blocking the event loop.

    A call that stores its result (its enqueue is a ``MULTI`` with the mark), waits for a
    transaction's commit, or runs inline (``EAGER``) goes through the blocking path in a
    thread instead, with the same semantics as ``delay``.
    So does a call of a ``unique_for`` task (its enqueue checks the window) or of a task of
    a concurrency group.
    ``fn`` is the :class:`~.task_function.TaskFunction`.
    """
    queue = fn.queue
    options = queue.backend.options
    if (
        options["EAGER"]
        or fn.ttl_of_results(queue) is not None
        or (options["COMMIT_MODE"] == "on_commit" and in_transaction())
        or fn.unique_for is not None
        or fn.group is not None
    ):
        return await asyncio.to_thread(fn._send, payload, None, 0, False, fn.priority)
    task_id = fn.task_id(payload, None)
    entry = Entry(task_id, 0, queue.encode(payload))
    await queue.backend.register_queue_async(queue.name)
    flags = await queue._arun(queue._enqueue_call([entry], False, fn.priority))
    return Enqueued(task_id, bool(flags[0]), queue)
