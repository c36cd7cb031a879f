"""Finding tasks for the dashboard: by exact id (in one queue or every queue of an alias)
and by id prefix, each in a bounded number of round trips.

A prefix search scans with ``ZSCAN`` in bounded steps (never ``KEYS`` or a whole set) and
stops at a page of hits, so a million tasks cost the same few calls as a hundred.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..backends.redis import RedisQueueBackend
from ..exceptions import ConfigurationError, RedisLockError
from ..locking.pipeline import run_scripts
from ..queue.records import DEAD, DELAYED, IN_FLIGHT, READY
from ..wire import to_text
from .common import parse_int
from .data import PREVIEW_BYTES, TASK_PAYLOAD_BYTES, _results, parse_zset
from .history import history_call, parse_history
from .rows import TaskRow, payload_text


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
