"""``RedisTaskBackend``: Django's task backend contract on this app's queue.

A ``@django.tasks.task`` call becomes one queued task in the queue named like
the task's ``queue_name`` on the ``REDISLOCK_QUEUES`` alias ``OPTIONS["USING"]``,
with the result id as its task id; ``manage.py drain_queue`` runs it next to the
app's own ``@task`` calls. What the backend supports (the capability flags):

* ``supports_defer``: ``run_after`` becomes the queue's delay (the due time is
  ``run_after`` as the enqueuing process's clock sees it);
* ``supports_async_task``: coroutine functions run in the worker's event loop
  (``async_to_sync``); ``aenqueue``/``aget_result`` use the asyncio client;
* ``supports_get_result``: results (status, times, return value, errors, worker
  ids) are stored in Redis for ``OPTIONS["RESULT_TTL"]`` seconds after the
  last change and read with ``get_result`` from any process;
* ``supports_priority``: Django's priority (-100 to 100, default 0) becomes the
  queue's priority level (:func:`~django_redislock.queue.priority.from_django`:
  0 and below run at the default level 0, the lowest; 1-100 spread over levels
  1-9), so due calls of a higher priority run first (docs/tasks.md).

Failures: a call that raises is recorded (``errors``), and is run again with the
queue's backoff while attempts remain (``OPTIONS["MAX_ATTEMPTS"]``, default 1:
Django's framework does not retry); its status is ``READY`` between attempts and
``FAILED`` after the last one, when the task also lands in the dead-letter set.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from datetime import datetime
from typing import Any, cast

from django.core.exceptions import ImproperlyConfigured
from django.utils import timezone
from django.utils.crypto import get_random_string

from ...conf import TASK_OPTIONS, option_errors, with_defaults
from ...queue.priority import from_django
from ...queue.sending import run_call, run_call_async
from .compat import (
    BaseTaskBackend,
    Task,
    TaskResult,
    TaskResultStatus,
    task_enqueued,
)
from .results import (
    build_result,
    initial_fields,
    read_call,
    write_call,
)


def parse_options(alias: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """Merge ``OPTIONS`` with the defaults; unknown keys and bad values name the alias."""
    errors = option_errors(options, TASK_OPTIONS)
    if errors:
        raise ImproperlyConfigured(f"TASKS[{alias!r}]: {errors[0]}")
    return with_defaults(options, TASK_OPTIONS)


def options_or_defaults(alias: str, options: Any) -> tuple[dict[str, Any], str | None]:
    """``parse_options``, or the defaults and the error it raised.

    Django builds every ``TASKS`` backend while running the system checks, so the
    constructor must not raise: the ``redislock.E008`` check reports the error, and the
    backend raises it at its first use instead.
    """
    try:
        return parse_options(alias, options), None
    except ImproperlyConfigured as exc:
        return with_defaults({}, TASK_OPTIONS), str(exc)


def worker_id() -> str:
    """This process as ``TaskResult.worker_ids`` shows it (at most 64 characters)."""
    return f"{socket.gethostname()[:40]}:{os.getpid()}"[:64]


class RedisTaskBackend(BaseTaskBackend):
    """Runs Django tasks-framework calls on a ``REDISLOCK_QUEUES`` queue (see the module doc)."""

    supports_defer = True
    supports_async_task = True
    supports_get_result = True
    supports_priority = True

    def __init__(self, alias: str, params: dict[str, Any]) -> None:
        super().__init__(alias, params)
        settings, self.configuration_error = options_or_defaults(alias, self.options)
        self.using: str = settings["USING"]
        self.result_ttl: float = float(settings["RESULT_TTL"])
        self.max_attempts: int = settings["MAX_ATTEMPTS"]
        self.lease: float | None = settings["LEASE"]

    @property
    def queue_backend(self) -> Any:
        """The ``REDISLOCK_QUEUES`` backend the calls are queued on."""
        from ...handlers import queues

        if self.configuration_error is not None:
            raise ImproperlyConfigured(self.configuration_error)
        return queues[self.using]

    # -- enqueue ----------------------------------------------------------------------------

    def _prepare(
        self, task: Task[Any, Any], args: Any, kwargs: Any
    ) -> tuple[TaskResult[Any], Any, Any, float, int]:
        """Validate, build the READY result and the queue entry; nothing is sent yet."""
        self.validate_task(task)
        now = timezone.now()
        result: TaskResult[Any] = TaskResult(
            task=task,
            id=get_random_string(32),
            status=cast(TaskResultStatus, TaskResultStatus.READY),
            enqueued_at=now,
            started_at=None,
            finished_at=None,
            last_attempted_at=None,
            args=list(args),
            kwargs=dict(kwargs),
            backend=self.alias,
            errors=[],
            worker_ids=[],
        )
        delay = self.delay_of(task.run_after, now)
        payload = {
            "django_task": task.module_path,
            "result_id": result.id,
            "backend": self.alias,
            "args": result.args,
            "kwargs": result.kwargs,
        }
        queue = self.queue_backend.queue(task.queue_name)
        entry = queue.prepare(result.id, payload, delay)
        return result, queue, entry, delay, from_django(task.priority)

    @staticmethod
    def delay_of(run_after: datetime | None, now: datetime) -> float:
        """Seconds from ``now`` until ``run_after`` (0 when it is unset or past)."""
        if run_after is None:
            return 0.0
        return max(0.0, (run_after - now).total_seconds())

    def enqueue(self, task: Task[Any, Any], args: Any, kwargs: Any) -> TaskResult[Any]:
        """Store the READY result, then queue the call; one round trip each."""
        result, queue, entry, delay, level = self._prepare(task, args, kwargs)
        fields = initial_fields(result)
        call = write_call(self.queue_backend, result.id, delay + self.result_ttl, fields)
        run_call(self.queue_backend, call)
        queue.enqueue_prepared([entry], priority=level)
        task_enqueued.send(type(self), task_result=result)
        return result

    async def aenqueue(self, task: Task[Any, Any], args: Any, kwargs: Any) -> TaskResult[Any]:
        """The asyncio twin of :meth:`enqueue` (no thread hop: it uses the asyncio client)."""
        result, queue, entry, delay, level = self._prepare(task, args, kwargs)
        fields = initial_fields(result)
        call = write_call(self.queue_backend, result.id, delay + self.result_ttl, fields)
        await run_call_async(self.queue_backend, call)
        await queue.enqueue_async(entry.id, result_payload(entry, queue), delay, priority=level)
        task_enqueued.send(type(self), task_result=result)
        return result

    # -- results ----------------------------------------------------------------------------

    def get_result(self, result_id: str) -> TaskResult[Any]:
        """The stored result (raise ``TaskResultDoesNotExist`` when unknown or expired)."""
        reply = run_call(self.queue_backend, read_call(self.queue_backend, result_id))
        return build_result(result_id, reply)

    async def aget_result(self, result_id: str) -> TaskResult[Any]:
        """The asyncio twin of :meth:`get_result`."""
        reply = await run_call_async(self.queue_backend, read_call(self.queue_backend, result_id))
        return build_result(result_id, reply)

    def write(self, result_id: str, fields: dict[str, str], **extra: Any) -> bool:
        """Update a stored result (the worker's start and finish); False if it expired."""
        call = write_call(
            self.queue_backend, result_id, self.result_ttl, fields, only_existing=True, **extra
        )
        return bool(run_call(self.queue_backend, call))


def result_payload(entry: Any, queue: Any) -> Any:
    """The payload of a prepared entry (``enqueue_async`` takes the payload, not the entry)."""
    return queue.serializer.loads(entry.data)
