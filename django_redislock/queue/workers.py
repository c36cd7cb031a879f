"""The workers registry: which ``drain_queue`` workers are alive, and what each is doing.

Every running :class:`~django_redislock.queue.worker.Worker` keeps a record here
(see :mod:`.heartbeat` for the thread that writes it). Two keys per queue alias,
both under the hash tag ``{workers}``, so each script runs on one cluster slot::

    <prefix>:{workers}:index    zset  worker id -> expiry (µs of server time)
    <prefix>:{workers}:records  hash  worker id -> "<heartbeat µs>:<JSON record>"

A heartbeat (``workers_beat``) stores the record and moves the worker's expiry to
the server's time plus ``WORKER_HEARTBEAT_TTL``, in one script; it also prunes
workers whose expiry passed. A reader (``workers_list``, read only) takes the ids
whose expiry is ahead, so a worker that stopped beating (SIGKILL, a lost host)
drops out of every listing once its TTL has passed, whether or not anybody pruned
it yet. A clean stop removes the worker at once (``workers_leave``). Both keys
expire with the last live worker, so a fleet that is gone leaves nothing behind.

All workers of an alias share one slot: a registry is small (one record of a few
hundred bytes per worker process, one script per worker every few seconds), and in
exchange a heartbeat is all or nothing, never an index entry without its record.
No ``KEYS`` and no ``SCAN``: a listing is one script.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from ..calls.node import Node
from ..exceptions import InvalidArgument
from .sending import run_call, run_call_async

#: The hash tag of an alias's registry keys.
TAG = "workers"
#: Most workers one listing returns (the count is exact beyond it).
MAX_LISTED = 1000
#: Most expired workers one heartbeat prunes.
PRUNE_BATCH = 100
#: Most current tasks a record lists (the thread and async pools may run many).
MAX_CURRENT = 100
#: Longest text kept from a record's string fields (ids, host, queue names) when shown.
MAX_TEXT = 300


def registry_keys(backend: Node) -> list[str]:
    """The index zset and the records hash of ``backend``'s alias."""
    return [backend.key(TAG, "index"), backend.key(TAG, "records")]


def beat(backend: Node, worker_id: str, ttl: float, record: Mapping[str, Any]) -> int:
    """Store ``record`` for ``worker_id`` with an expiry ``ttl`` s ahead; returns server µs.

    Safe to resend (redis-py retries a command after a connection error): a
    second run stores the same record with a slightly later expiry.
    """
    args = [worker_id, int(ttl * 1e6), json.dumps(record, separators=(",", ":")), PRUNE_BATCH]
    return int(run_call(backend, ("workers_beat", registry_keys(backend), args)))


#: Commands an operator may send a worker through the registry (see :func:`send_command`).
COMMANDS = ("quiet", "resume", "stop")
#: Seconds a command waits for its worker's next heartbeat before it is dropped.
COMMAND_TTL = 300


def control_key(backend: Node) -> str:
    """The hash of commands waiting for their worker (worker id -> command); same slot."""
    return backend.key(TAG, "control")


def beat_and_take(
    backend: Node, worker_id: str, ttl: float, record: Mapping[str, Any]
) -> tuple[int, str]:
    """:func:`beat`, and in the same script take the command an operator left for this worker.

    Returns (server µs, command or ""). A resent beat finds the command already taken
    and answers "": a command acts at most once.
    """
    args = [worker_id, int(ttl * 1e6), json.dumps(record, separators=(",", ":")), PRUNE_BATCH]
    keys = [*registry_keys(backend), control_key(backend)]
    now, command = run_call(backend, ("workers_beat", keys, args))
    return int(now), command.decode() if isinstance(command, bytes) else str(command)


def send_command(backend: Node, worker_id: str, command: str) -> None:
    """Leave ``command`` (quiet, resume or stop) for ``worker_id``'s next heartbeat.

    The worker acts within one ``WORKER_HEARTBEAT``; a command no heartbeat takes
    (the worker is gone) is dropped after :data:`COMMAND_TTL` seconds with the hash.
    """
    if command not in COMMANDS:
        raise InvalidArgument(f"command must be one of {', '.join(COMMANDS)}, got {command!r}")
    key = control_key(backend)
    with backend.errors():
        pipe = backend.client.pipeline(transaction=True)
        pipe.hset(key, worker_id, command)
        pipe.expire(key, COMMAND_TTL)
        pipe.execute()


def leave(backend: Node, worker_id: str) -> bool:
    """Remove ``worker_id`` from the registry at once; True when it was registered."""
    return bool(run_call(backend, ("workers_leave", registry_keys(backend), [worker_id])))


@dataclass(frozen=True)
class CurrentTask:
    """A task a worker was running at its last heartbeat."""

    id: str
    queue: str
    #: when its run started (server time, µs since the epoch)
    started: int

    def running_for(self, now: int) -> float:
        """Seconds it had been running at ``now`` (server µs)."""
        return max(0.0, (now - self.started) / 1e6)


@dataclass(frozen=True)
class WorkerInfo:
    """One live worker, as its last heartbeat described it."""

    id: str
    alias: str
    host: str
    pid: int
    queues: list[str]
    pool: str
    concurrency: int
    #: server times in µs since the epoch: when the worker started and last beat
    started: int
    heartbeat: int
    processed: int
    failed: int
    tasks: list[CurrentTask] = field(default_factory=list)
    #: current tasks beyond the :data:`MAX_CURRENT` listed
    more_tasks: int = 0
    #: the pool's health at the last beat: "ok" or "wedged" (see :mod:`.heartbeat`)
    health: str = "ok"
    #: why it is wedged ("" when ok)
    wedged: str = ""
    #: seconds since a run last ended while some run (0 when none runs)
    stalled: float = 0.0
    #: told to stop claiming (an operator's "quiet"; see :func:`send_command`)
    quiet: bool = False

    @property
    def healthy(self) -> bool:
        """False for a worker that beats but whose pool runs nothing (see :mod:`.heartbeat`)."""
        return self.health == "ok"

    def as_dict(self, now: int) -> dict[str, Any]:
        """A JSON-ready description (times in ISO 8601 UTC, ages in seconds at ``now``)."""
        return {
            "id": self.id,
            "alias": self.alias,
            "host": self.host,
            "pid": self.pid,
            "queues": self.queues,
            "pool": self.pool,
            "concurrency": self.concurrency,
            "started": iso(self.started),
            "up_for": round(max(0.0, (now - self.started) / 1e6), 3),
            "heartbeat": iso(self.heartbeat),
            "heartbeat_age": round(max(0.0, (now - self.heartbeat) / 1e6), 3),
            "processed": self.processed,
            "failed": self.failed,
            "tasks": [
                {
                    "id": task.id,
                    "queue": task.queue,
                    "started": iso(task.started),
                    "running_for": round(task.running_for(now), 3),
                }
                for task in self.tasks
            ],
            "more_tasks": self.more_tasks,
            "health": self.health,
            "wedged": self.wedged,
            "stalled": self.stalled,
        }


@dataclass(frozen=True)
class WorkerList:
    """A listing: server time, how many workers are alive, and the (first) records."""

    now: int
    total: int
    workers: list[WorkerInfo]
    #: ids whose record could not be read (written by something else, or corrupt)
    unreadable: list[str] = field(default_factory=list)


def iso(micros: int) -> str:
    """Server µs since the epoch as an ISO 8601 UTC timestamp (milliseconds)."""
    return datetime.fromtimestamp(micros / 1e6, timezone.utc).isoformat(timespec="milliseconds")


def list_workers(backend: Node, limit: int = MAX_LISTED) -> WorkerList:
    """The live workers of ``backend``'s alias (one read-only script), sorted by host and pid."""
    return parse_listing(run_call(backend, ("workers_list", registry_keys(backend), [limit])))


async def list_workers_async(backend: Node, limit: int = MAX_LISTED) -> WorkerList:
    """The asyncio twin of :func:`list_workers`."""
    call = ("workers_list", registry_keys(backend), [limit])
    return parse_listing(await run_call_async(backend, call))


def parse_listing(reply: list[Any]) -> WorkerList:
    """A ``workers_list`` reply as a :class:`WorkerList`, sorted by host and pid."""
    now, total, flat = int(reply[0]), int(reply[1]), reply[2:]
    workers, unreadable = [], []
    for i in range(0, len(flat) - 1, 2):
        worker_id = text(flat[i])
        info = None if flat[i + 1] is None else parse_record(worker_id, flat[i + 1])
        if info is None:
            unreadable.append(worker_id)
        else:
            workers.append(info)
    workers.sort(key=lambda w: (w.alias, w.host, w.pid, w.id))
    return WorkerList(now, total, workers, unreadable)


def count_by_queue(listing: WorkerList) -> dict[str, tuple[int, int]]:
    """``queue -> (live workers draining it, tasks of it running)`` of a listing."""
    counts: dict[str, list[int]] = {}
    for worker in listing.workers:
        for name in worker.queues:
            counts.setdefault(name, [0, 0])[0] += 1
        for task in worker.tasks:
            counts.setdefault(task.queue, [0, 0])[1] += 1
    return {name: (workers, running) for name, (workers, running) in counts.items()}


# -- reading records defensively ---------------------------------------------------------
# A record is written by this app's workers, but anyone who can write to the Redis can
# write one: every field is checked and bounded, and a record that does not fit is listed
# as unreadable instead of failing a page, the metrics scrape or the command.


def text(value: Any) -> str:
    """A bounded string (bytes decoded with replacement)."""
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    return str(value)[:MAX_TEXT]


def number(value: Any) -> int:
    """A finite integer, or ValueError."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"not a number: {value!r}")
    return int(value)


def seconds_before(heartbeat: int, age: Any) -> int:
    """The server time ``age`` seconds before ``heartbeat`` (µs), never after it."""
    if isinstance(age, bool) or not isinstance(age, (int, float)) or not math.isfinite(age):
        raise ValueError(f"not a number of seconds: {age!r}")
    return heartbeat - int(min(max(age, 0.0), 1e9) * 1e6)


def parse_record(worker_id: str, raw: Any) -> WorkerInfo | None:
    """The :class:`WorkerInfo` in a stored record, or None when it does not fit."""
    stored = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
    stamp, _, body = stored.partition(":")
    try:
        heartbeat = int(stamp)
        data = json.loads(body)
        if not isinstance(data, dict):
            return None
        return worker_info(worker_id, heartbeat, data)
    except (ValueError, TypeError, KeyError, AttributeError, OverflowError):
        return None


def worker_info(worker_id: str, heartbeat: int, data: dict[str, Any]) -> WorkerInfo:
    tasks = data.get("tasks", [])
    queues = data.get("queues", [])
    if not isinstance(tasks, list) or not isinstance(queues, list):
        raise ValueError("tasks and queues must be lists")
    current = [
        CurrentTask(text(task["id"]), text(task["queue"]), seconds_before(heartbeat, task["age"]))
        for task in tasks[:MAX_CURRENT]
        if isinstance(task, dict)
    ]
    return WorkerInfo(
        id=worker_id,
        alias=text(data.get("alias", "")),
        host=text(data.get("host", "")),
        pid=number(data.get("pid", 0)),
        queues=[text(name) for name in queues[:MAX_CURRENT]],
        pool=text(data.get("pool", "solo")),
        concurrency=number(data.get("concurrency", 1)),
        started=seconds_before(heartbeat, data.get("up", 0.0)),
        heartbeat=heartbeat,
        processed=number(data.get("processed", 0)),
        failed=number(data.get("failed", 0)),
        tasks=current,
        more_tasks=max(0, number(data.get("more_tasks", 0))) + max(0, len(tasks) - MAX_CURRENT),
        health="ok" if data.get("health", "ok") == "ok" else "wedged",
        wedged=text(data.get("wedged", "")),
        stalled=float(min(max(number(data.get("stalled", 0)), 0), 1e9)),
        quiet=data.get("quiet") is True,
    )
