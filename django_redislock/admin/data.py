"""What the dashboard reads from Redis and does to it, in a fixed number of round trips.

Every page must stay cheap with a million tasks in a queue and ten thousand
held locks, so nothing here loads all ids or uses ``KEYS``/``SCAN``:

* the overview sends one ``SMEMBERS`` of the alias's queue list and then one
  summary script per queue, all in one pipeline (lock counts are one pipeline
  over the lock index buckets);
* a queue page is one script that finds the cursor by rank and returns a page,
  the count of every state and a bounded payload preview;
* an action is one script that re-checks the score the operator saw, so a
  confirmation form that went stale is refused instead of applied.

Payloads are never deserialized here: the admin shows the stored text (JSON by
default), so a pickled payload written by someone else can't run code in the
web process (a deleted task's workflow entry is read by
:func:`~django_redislock.queue.workflows.stored_mark`, which loads no class).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeGuard

from ..backends.base import BaseLockBackend
from ..backends.redis import RedisQueueBackend
from ..calls.node import Node
from ..exceptions import InvalidArgument
from ..locking.index import HeldLock
from ..locking.pipeline import run_scripts
from ..queue import fnstats
from ..queue.flow import parse_flow
from ..queue.groups import groups_call, parse_groups
from ..queue.rates import LongTrend, long_call, parse_long
from ..queue.records import DEAD, DELAYED, IN_FLIGHT, READY, STATES
from ..queue.workflows import packed_members
from ..wire import to_text
from .rows import TaskRow, payload_text
from .trends import trend_call, trend_of

#: Rows per page of the locks and queue pages.
PAGE_SIZE = 50
#: Concurrency groups a queue page shows at most.
GROUPS_SHOWN = 50
#: Bytes of each payload a queue page fetches for its preview column.
PREVIEW_BYTES = 200
#: Bytes of a payload the task page shows (the rest is behind its download link).
TASK_PAYLOAD_BYTES = 64 * 1024
#: Tasks deleted per script call by a purge (Redis stays responsive).
PURGE_CHUNK = 1000
#: Actions of the admin_task_action script, and the states each applies to.
ACTIONS = {
    "run": (DELAYED, READY),
    "requeue": (DEAD,),
    "cancel": (READY, DELAYED, IN_FLIGHT),
    "delete": STATES,
}
#: Codes of the admin_task_action script (and of :func:`cancel`: REQUESTED, a running
#: task whose worker was asked to stop it).
DONE, GONE, CHANGED, NOT_APPLICABLE, REQUESTED = 1, 0, -1, -2, 2
#: :meth:`Queue.cancel`'s outcomes as action codes.
CANCEL_CODES = {"removed": DONE, "requested": REQUESTED, "finished": GONE}


def supports_scripts(backend: object) -> TypeGuard[RedisQueueBackend]:
    """True when the dashboard can run its scripts on this queue backend (the Redis one)."""
    return isinstance(backend, RedisQueueBackend)


def _results(backend: Node, calls: list[tuple[str, list[str], list[Any]]]) -> list[Any]:
    results = run_scripts(backend, calls)
    for result in results:
        if isinstance(result, Exception):
            raise result
    return results


@dataclass
class TaskPage:
    """One page of a state: rows, counts of every state and where the page sits."""

    state: str
    rows: list[TaskRow]
    counts: dict[str, int]
    has_previous: bool
    has_next: bool
    #: Rank of the first row within its state (0 for the first page).
    start: int
    #: The queue's rates (:mod:`.trends`), or why they could not be read.
    trend: Any = None
    #: ``{"paused": bool, "rate_limit": str | None}`` (:mod:`~django_redislock.queue.flow`),
    #: or None when it could not be read.
    flow: dict[str, Any] | None = None
    #: Per task function numbers (:mod:`~django_redislock.queue.fnstats`), or why they could
    #: not be read.
    functions: Any = None
    #: The day's and the week's rates (:mod:`~django_redislock.queue.rates`), or why not.
    long_trend: Any = None
    #: The queue's concurrency groups (:mod:`~django_redislock.queue.groups`), or why not.
    groups: Any = None

    @property
    def first_row(self) -> int:
        """1-based position of the page's first row in its state (for "rows 51-100")."""
        return self.start + 1

    @property
    def last_row(self) -> int:
        return self.start + len(self.rows)

    @property
    def total(self) -> int:
        """Tasks in this page's state."""
        return self.counts[self.state]


def task_page(
    queue: Any,
    state: str,
    direction: str = "first",
    cursor: tuple[int, str] | None = None,
    size: int = PAGE_SIZE,
) -> TaskPage:
    """One page of ``state`` in one round trip; ``cursor`` is the ``(score, id)`` to page from."""
    if state not in STATES:
        raise InvalidArgument(f"state must be one of {', '.join(STATES)}, got {state!r}")
    if direction not in ("first", "last", "after", "before") or (
        direction in ("after", "before") and cursor is None
    ):
        raise InvalidArgument(f"bad page direction {direction!r}")
    score, id = cursor or (0, "")
    args = [state, direction, score, id, size, PREVIEW_BYTES]
    flow_call = ("queue_flow", [*queue.script_keys, queue.flow_key], ["read"])
    reply, trend, flow, functions, long, groups = run_scripts(
        queue.backend,
        [
            ("queue_page", queue.script_keys, args),
            trend_call(queue),
            flow_call,
            fnstats.read_call(queue),
            long_call(queue),
            groups_call(queue, GROUPS_SHOWN),
        ],
    )
    if isinstance(reply, Exception):
        raise reply
    now, ready, delayed, flying, dead, start, low, high = (int(v) for v in reply[:8])
    serializer = queue.backend.options["SERIALIZER"]
    rows = []
    flat = reply[8:]
    for i in range(0, len(flat), 7):
        raw_id, raw_score, attempts, preview, size_, error, level = flat[i : i + 7]
        rows.append(
            TaskRow(
                id=to_text(raw_id),
                state=state,
                score=int(float(raw_score)),
                attempts=int(attempts),
                payload=payload_text(preview, serializer),
                size=int(size_),
                last_error=to_text(error),
                now=now,
                truncated=int(size_) > PREVIEW_BYTES,
                priority=int(level),
            )
        )
    counts = {READY: ready, DELAYED: delayed, IN_FLIGHT: flying, DEAD: dead}
    # ranks count from the start of the zset; delayed tasks follow the ready ones in it
    return TaskPage(
        state,
        rows,
        counts,
        start > low,
        start + len(rows) < high,
        start - low,
        trend_of(trend),
        None if isinstance(flow, Exception) else parse_flow(flow),
        functions_of(functions),
        long_of(long),
        groups if isinstance(groups, Exception) else parse_groups(groups),
    )


def long_of(reply: Any) -> LongTrend | Exception:
    """The day and week in a ``rates_long`` reply, or the error that replaced them."""
    if isinstance(reply, Exception):
        return reply
    try:
        return parse_long(reply)
    except (ValueError, IndexError, TypeError) as exc:
        return exc


def functions_of(reply: Any) -> list[fnstats.FunctionStats] | Exception:
    """The per function numbers in a read script's reply, or the error that replaced them."""
    if isinstance(reply, Exception):
        return reply
    try:
        return fnstats.parse(reply)
    except (ValueError, IndexError, TypeError) as exc:  # not the app's reply: shown as such
        return exc


def parse_zset(text: str) -> int:
    """The sorted set (0 pending, 1 in flight, 2 dead) a prefix-scan cursor names."""
    return {"1": 1, "2": 2}.get(text, 0)


def purge_confirmed(queue: Any, seen: int, chunk: int = PURGE_CHUNK) -> tuple[int, bool]:
    """Delete at most ``seen`` tasks, a chunk per call; ``(deleted, stopped because it grew)``.

    Every call first checks that the queue holds no more than the confirmed
    tasks not yet deleted; when it does (tasks arrived since the operator
    confirmed), the purge stops there and says so.
    """
    deleted = 0
    while deleted < seen:
        budget = min(chunk, seen - deleted)
        (reply,) = _results(
            queue.backend,
            [("queue_purge", [*queue.script_keys, *queue.group_keys], [budget, seen - deleted])],
        )
        step, left = int(reply[0]), int(reply[1])
        if step < 0:
            return deleted, True
        deleted += step
        if step == 0 or left == 0:
            break
    return deleted, False


def act(
    queue: Any, action: str, seen: list[tuple[str, int, int]], reason: str = "cancelled"
) -> list[int]:
    """Apply ``action`` to tasks seen as ``(id, where, score)``; one code per task.

    Codes: :data:`DONE`, :data:`GONE`, :data:`CHANGED` (its state or score moved
    since the operator saw it), :data:`NOT_APPLICABLE`; for "cancel" (``reason`` is
    recorded) :data:`REQUESTED` too.
    """
    if action not in ACTIONS:
        raise InvalidArgument(f"action must be one of {', '.join(ACTIONS)}, got {action!r}")
    if not seen:
        return []
    if action == "cancel":
        return cancel(queue, [id for id, _where, _score in seen], reason)
    args: list[Any] = [action]
    keys: list[str] = [*queue.script_keys, *queue.group_keys]
    packed: dict[str, str] = {}
    if action == "delete":  # a pending workflow member's step ends in the same script
        found, packed = packed_members(queue, [id for id, where, _ in seen if where == 1])
        keys += found
    for id, where, score in seen:
        args += [id, where, score, packed.get(id, "")]
    (reply,) = _results(queue.backend, [("admin_task_action", keys, args)])
    return [int(code) for code in reply]


def cancel(queue: Any, ids: list[str], reason: str) -> list[int]:
    """Cancel each task by id (:meth:`Queue.cancel`: one script call each); its code.

    Not checked against the score the operator saw: cancelling means "this id must not
    run (on)", whatever copy of it is queued or running now.
    """
    return [CANCEL_CODES[queue.cancel(id, reason)] for id in ids]


def find_lock(backend: BaseLockBackend, name: str) -> HeldLock | None:
    """The held lock ``name``, or None; one pipeline over the index buckets."""
    page = backend.held_locks_page(prefix=name, limit=1)
    if page.locks and page.locks[0].name == name:
        held: HeldLock = page.locks[0]
        return held
    return None
