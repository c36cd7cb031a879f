"""What a worker does with one claimed task before running it: decode it, find its function.

Both steps happen per task, in the worker, after the claim: a claim returns the
stored bytes, so one bad payload can fail only its own task, never the claim of
its batch, the tasks behind it or the worker's other queues. What can go wrong,
and what the worker (:mod:`django_redislock.queue.worker`) does then:

==============================  ======================================================
the payload cannot be decoded   :class:`~django_redislock.exceptions.UndecodablePayload`:
                                dead-lettered with the reason (no later deploy makes
                                those bytes readable)
it is not a task call, or       :class:`~django_redislock.exceptions.TaskNotRegistered`:
names no registered task        dead-lettered with the reason
its task module raises on       :class:`~django_redislock.exceptions.TaskImportError`:
import                          retried with the queue's backoff until a later deploy
                                fixes the module (``MAX_ATTEMPTS`` does not apply)
==============================  ======================================================

Only the task modules are ever imported
(:func:`~django_redislock.queue.registry.task_modules`), never a path taken
from a payload.
"""

from __future__ import annotations

from typing import Any, Protocol

from ..exceptions import TaskImportError, TaskNotRegistered, UndecodablePayload
from .records import Task
from .registry import resolve
from .runners import payload_runner

#: Failures that end a task at once: nothing but a new enqueue can make it runnable.
HOPELESS = (UndecodablePayload, TaskNotRegistered)
#: Failures that a later deploy may fix: the task is retried with backoff.
TRANSIENT = (TaskImportError,)


class Runnable(Protocol):
    """What the worker runs: a ``@task`` function or a Django tasks-framework call."""

    @property
    def max_attempts(self) -> int | None: ...

    @property
    def lease(self) -> float | None: ...

    @property
    def retry_backoff(self) -> float | None: ...

    @property
    def retry_backoff_max(self) -> float | None: ...

    def run(self, payload: Any) -> Any: ...


def needs_start(task: Task, fn: Runnable) -> bool:
    """Whether the start of ``task`` is recorded before it runs (one round trip, see
    :meth:`~.runs.Runs._begin`): a suspect, or a task with its own ``lease`` or
    ``max_attempts``. Every other run starts with no call of its own."""
    return task.suspect or fn.lease is not None or fn.max_attempts is not None


def task_path(task: Task) -> str:
    """The task path a payload names, for log lines; never raises."""
    try:
        payload = task.payload
    except UndecodablePayload:
        return "?"
    if isinstance(payload, dict):
        for key in ("task", "django_task"):
            if isinstance(payload.get(key), str):
                return str(payload[key])
    return "?"


def runnable(task: Task) -> Runnable:
    """Decode ``task``'s payload and find what runs it.

    Raises ``UndecodablePayload`` or ``TaskNotRegistered`` (dead-letter it) or
    ``TaskImportError`` (retry it later); see the module doc.
    """
    payload = task.payload
    runner = payload_runner(payload)
    if runner is not None:
        # a payload an integration registered (e.g. Django's tasks framework)
        result: Runnable = runner(task)
        return result
    if not (isinstance(payload, dict) and isinstance(payload.get("task"), str)):
        raise TaskNotRegistered(f"task {task.id!r} has no @task payload: {payload!r:.200}")
    return resolve(payload["task"])
