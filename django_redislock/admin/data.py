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
from ..exceptions import ConfigurationError, InvalidArgument, RedisLockError
from ..locking.index import HeldLock
from ..locking.pipeline import run_scripts
from ..queue import fnstats
from ..queue.flow import parse_flow
from ..queue.rates import LongTrend, long_call, parse_long
from ..queue.records import DEAD, DELAYED, IN_FLIGHT, READY, STATES
from ..queue.workflows import packed_members
from ..wire import to_text
from .common import parse_int
from .history import history_call, parse_history
from .rows import TaskRow, payload_text
from .trends import trend_call, trend_of

#: Rows per page of the locks and queue pages.
PAGE_SIZE = 50
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
    reply, trend, flow, functions, long = run_scripts(
        queue.backend,
        [
            ("queue_page", queue.script_keys, args),
            trend_call(queue),
            flow_call,
            fnstats.read_call(queue),
            long_call(queue),
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


def find_task(
    queue: Any, id: str, cap: int = TASK_PAYLOAD_BYTES, history: bool = False
) -> TaskRow | None:
    """The task ``id`` in whatever state with up to ``cap`` bytes of its payload; one round trip.

    ``cap=0`` reads the whole payload (the download view); ``history`` also reads the
    task's recorded runs (in the same pipeline).
    """
    calls = [("admin_task_get", queue.script_keys, [id, cap])]
    if history:
        calls.append(history_call(queue, id))
    reply, *runs = _results(queue.backend, calls)
    if not reply:
        return None
    now, where, score, attempts, payload, size, error, level, enqueued = reply
    score = int(float(score))
    state = {2: IN_FLIGHT, 3: DEAD}.get(int(where), READY if score <= int(now) else DELAYED)
    serializer = queue.backend.options["SERIALIZER"]
    text = payload_text(payload, serializer)
    row = TaskRow(id, state, score, int(attempts), text, int(size), to_text(error), int(now))
    row.truncated = len(payload) < int(size)
    row.raw = payload if isinstance(payload, bytes) else str(payload).encode()
    row.priority = int(level)
    row.enqueued = int(enqueued) if int(enqueued) >= 0 else None
    row.runs = parse_history(runs[0]) if runs else []
    return row


def find_everywhere(backend: RedisQueueBackend, id: str) -> list[tuple[str, TaskRow]]:
    """``(queue name, task)`` for every queue of the alias holding a task ``id``.

    Two round trips: the queue list, then one lookup script per queue in one
    pipeline (one request per master on a Cluster). Queues that cannot be read
    are skipped.
    """
    names = backend.queue_names()
    calls: list[tuple[str, list[str], list[Any]]] = []
    queues = []
    for name in names:
        try:
            queue = backend.queue(name)
        except (RedisLockError, ConfigurationError):
            continue
        queues.append(queue)
        calls.append(("admin_task_get", queue.script_keys, [id, PREVIEW_BYTES]))
    found = []
    serializer = backend.options["SERIALIZER"]
    for queue, reply in zip(queues, run_scripts(backend, calls), strict=True):
        if isinstance(reply, Exception) or not reply:
            continue
        now, where, score, attempts, payload, size, error, _level, _enqueued = reply
        score = int(float(score))
        state = {2: IN_FLIGHT, 3: DEAD}.get(int(where), READY if score <= int(now) else DELAYED)
        text = payload_text(payload, serializer)
        row = TaskRow(id, state, score, int(attempts), text, int(size), to_text(error), int(now))
        row.truncated = len(payload) < int(size)
        found.append((queue.name, row))
    return found


#: HSCAN calls (of ``PREFIX_SCAN_COUNT`` fields each) one prefix search may make.
PREFIX_SCAN_CALLS = 20
PREFIX_SCAN_COUNT = 1000
#: Most tasks one prefix search returns.
PREFIX_HITS = 50


def glob_escape(text: str) -> str:
    """``text`` with the glob specials of ``MATCH`` escaped, so it matches literally."""
    return "".join("\\" + c if c in "*?[]\\" else c for c in text)


@dataclass
class PrefixHits:
    """Tasks whose id starts with a prefix, and where the scan stopped."""

    rows: list[TaskRow]
    #: Where to continue (``"<set>:<cursor>"``); "" when every set was scanned.
    cursor: str


def find_prefix(queue: Any, prefix: str, cursor: str = "") -> PrefixHits:
    """Tasks whose id starts with ``prefix``, from a bounded scan of the queue's sorted sets.

    Ids are not ordered by text anywhere, so this is the one search that scans:
    ``ZSCAN`` with ``MATCH <prefix>*`` over the pending, in-flight and dead sets
    in turn (members and scores only, never payloads), at most
    :data:`PREFIX_SCAN_CALLS` calls of :data:`PREFIX_SCAN_COUNT` members,
    returning at most :data:`PREFIX_HITS` hits; the caller continues from
    :attr:`PrefixHits.cursor` (``<set>:<scan cursor>[:<last id shown of that call>]``:
    one call may match a thousand members, so the next page repeats that call and shows
    its members sorted after the last one shown. Not a count of members to skip: Redis
    rehashes a growing set between two pages, and the same scan cursor can then return
    its members in another order or with others). Each call is short, so Redis stays responsive; a
    queue of a million tasks takes many pages. The hits are then read in one
    pipeline.
    """
    client = queue.backend.client
    pattern = glob_escape(prefix) + "*"
    where, _, rest = cursor.partition(":")
    position, _, after = rest.partition(":")
    zset = parse_zset(where)
    scan = parse_int(position, 0) or 0
    ids: list[str] = []
    next_cursor = ""
    with queue.backend.errors():
        for _ in range(PREFIX_SCAN_CALLS):
            batch_start = scan
            scan, batch = client.zscan(
                queue.keys[zset], scan, match=pattern, count=PREFIX_SCAN_COUNT
            )
            scan = int(scan)
            found = sorted(to_text(member) for member, _ in batch)
            if after:
                found = [member for member in found if member > after]
            room = PREFIX_HITS - len(ids)
            if len(found) > room:
                # one call may match up to PREFIX_SCAN_COUNT members: keep PREFIX_HITS rows and
                # continue from this same call, after the last one shown
                ids += found[:room]
                next_cursor = f"{zset}:{batch_start}:{found[room - 1]}"
                break
            ids += found
            after = ""
            if scan == 0:
                zset += 1
                if zset > 2:
                    break
            if len(ids) >= PREFIX_HITS:
                break
    if not next_cursor and zset <= 2:
        next_cursor = f"{zset}:{scan}"
    unique = list(dict.fromkeys(ids))
    calls: list[tuple[str, list[str], list[Any]]] = [
        ("admin_task_get", queue.script_keys, [id, PREVIEW_BYTES]) for id in unique
    ]
    serializer = queue.backend.options["SERIALIZER"]
    rows = []
    for id, reply in zip(unique, _results(queue.backend, calls), strict=True):
        if not reply:
            continue  # gone since the scan saw it
        now, where_, score, attempts, payload, size, error, _level, _enqueued = reply
        score = int(float(score))
        state = {2: IN_FLIGHT, 3: DEAD}.get(int(where_), READY if score <= int(now) else DELAYED)
        row = TaskRow(
            id,
            state,
            score,
            int(attempts),
            payload_text(payload, serializer),
            int(size),
            to_text(error),
            int(now),
            truncated=len(payload) < int(size),
        )
        rows.append(row)
    return PrefixHits(rows, next_cursor)


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
