"""Where task results live: one hash and two lists per result id, with a time to live.

Keys (all share the hash tag ``{djt:<result id>}``, so one script touches one slot)::

    <prefix>:{djt:<id>}:r   hash  task path, queue, priority, run_after, backend, args, kwargs,
                                  status, enqueued/started/finished/last attempted times, return
    <prefix>:{djt:<id>}:w   list  worker ids, one per started attempt (TaskResult.worker_ids)
    <prefix>:{djt:<id>}:e   list  errors, one JSON {exception_class_path, traceback} per failure

The prefix is the one of the ``REDISLOCK_QUEUES`` alias the backend uses. Every
write is one script (``djtask_write``) that also resets the time to live, and a
read is one script (``djtask_read``), so ``get_result`` never sees half a write.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from django.utils.module_loading import import_string

from ...calls.node import Keys
from ...wire import to_text
from .compat import Task, TaskError, TaskResult, TaskResultDoesNotExist, TaskResultStatus

#: Fields of the result hash that hold datetimes (ISO 8601, "" when unset).
TIMES = ("enqueued_at", "started_at", "finished_at", "last_attempted_at")

Call = tuple[str, list[str], list[Any]]


def result_keys(queue_backend: Keys, result_id: str) -> list[str]:
    """The hash, worker-id list and error list of one result."""
    tag = f"djt:{result_id}"
    return [queue_backend.key(tag, part) for part in ("r", "w", "e")]


def iso(moment: datetime | None) -> str:
    return moment.isoformat() if moment is not None else ""


def write_call(
    queue_backend: Keys,
    result_id: str,
    ttl: float,
    fields: dict[str, str],
    *,
    worker: str = "",
    error: str = "",
    only_existing: bool = False,
) -> Call:
    """The ``djtask_write`` call that sets ``fields`` and appends a worker id or an error."""
    args: list[Any] = [max(1, int(ttl * 1000)), worker, error, "1" if only_existing else "0"]
    for name, value in fields.items():
        args += [name, value]
    return "djtask_write", result_keys(queue_backend, result_id), args


def error_json(error: TaskError) -> str:
    return json.dumps(
        {"exception_class_path": error.exception_class_path, "traceback": error.traceback}
    )


def initial_fields(result: TaskResult[Any]) -> dict[str, str]:
    """The hash of a result just enqueued."""
    task = result.task
    return {
        "task": task.module_path,
        "queue_name": task.queue_name,
        "priority": str(task.priority),
        "run_after": iso(task.run_after),
        "backend": result.backend,
        "args": json.dumps(result.args),
        "kwargs": json.dumps(result.kwargs),
        "status": str(result.status),
        **{name: iso(getattr(result, name)) for name in TIMES},
    }


def parse_time(text: str) -> datetime | None:
    return datetime.fromisoformat(text) if text else None


def build_result(result_id: str, reply: list[Any]) -> TaskResult[Any]:
    """A :class:`TaskResult` from a ``djtask_read`` reply (raise if it is empty)."""
    if not reply:
        raise TaskResultDoesNotExist(result_id)
    flat, workers, errors = reply
    fields = {to_text(flat[i]): to_text(flat[i + 1]) for i in range(0, len(flat), 2)}
    task = import_string(fields["task"])
    if not isinstance(task, Task):
        raise TaskResultDoesNotExist(f"{result_id}: {fields['task']!r} is no longer a task")
    task = task.using(
        queue_name=fields["queue_name"],
        priority=int(fields["priority"]),
        run_after=parse_time(fields["run_after"]),
    )
    result: TaskResult[Any] = TaskResult(
        task=task,
        id=result_id,
        status=TaskResultStatus(fields["status"]),
        enqueued_at=parse_time(fields["enqueued_at"]),
        started_at=parse_time(fields["started_at"]),
        finished_at=parse_time(fields["finished_at"]),
        last_attempted_at=parse_time(fields["last_attempted_at"]),
        args=json.loads(fields["args"]),
        kwargs=json.loads(fields["kwargs"]),
        backend=fields["backend"],
        errors=[TaskError(**json.loads(to_text(raw))) for raw in errors],
        worker_ids=[to_text(raw) for raw in workers],
    )
    if "return" in fields:
        object.__setattr__(result, "_return_value", json.loads(fields["return"]))
    return result


def read_call(queue_backend: Keys, result_id: str) -> Call:
    """The ``djtask_read`` call of one result."""
    return "djtask_read", result_keys(queue_backend, result_id), []
