"""How ``drain_queue`` runs a Django tasks-framework call it claimed.

The worker (:mod:`django_redislock.queue.worker`) sees a payload with a
``django_task`` key and asks :func:`django_task_function` for something it can
run like an ``@task`` function: an object with ``run(payload)``,
``max_attempts`` and ``lease``. Running it records the attempt in the stored
result (RUNNING, the worker id, the start time), calls the function with
Django's own ``Task.call`` (coroutines through ``async_to_sync``; a
``TaskContext`` first when ``takes_context``), then records SUCCESSFUL and the
JSON-normalised return value, or the error. A failure is re-raised so the
queue retries or dead-letters it like any other task.
"""

from __future__ import annotations

import json
import sys
import traceback
from typing import Any

from django.utils import timezone

from ...exceptions import TaskNotRegistered
from ...queue.records import Task as QueueTask
from ...queue.registry import (
    TASK_MODULES_SETTING,
    import_task_module,
    owner_module,
    task_modules,
)
from .backend import RedisTaskBackend, worker_id
from .compat import (
    Task,
    TaskContext,
    TaskError,
    TaskResultStatus,
    normalize_json,
    task_backends,
    task_finished,
    task_started,
)
from .results import error_json


def find_task(path: str) -> Any:
    """The Django ``Task`` object at ``path`` (a module-level function), like ``resolve``.

    The module must be loaded already or lie in one of the task modules
    (:func:`~django_redislock.queue.registry.task_modules`), which is then
    imported: a payload never makes the worker import a module of its choosing.
    A path that names no Django task raises :class:`TaskNotRegistered` (the call
    is dead-lettered); a task module that fails while importing raises
    :class:`TaskImportError` (the call is retried with backoff).
    """
    module_name, _, attr = path.rpartition(".")
    if not module_name or not attr:
        raise TaskNotRegistered(f"{path!r} is not the dotted path of a Django task")
    module = sys.modules.get(module_name)
    if module is None:
        owner = owner_module(path, task_modules())
        if owner is None:
            raise TaskNotRegistered(
                f"no Django task {path!r}: its module is not loaded and not among the task "
                f"modules (the tasks modules of installed apps and {TASK_MODULES_SETTING})"
            )
        import_task_module(owner)
        module = sys.modules.get(module_name)
    found = getattr(module, attr, None)
    if not isinstance(found, Task):
        raise TaskNotRegistered(f"{path!r} is not a Django task (was it deleted or renamed?)")
    return found


class DjangoTaskRun:
    """One claimed Django task call, runnable by the worker."""

    def __init__(self, backend: RedisTaskBackend, claimed: QueueTask, task: Any) -> None:
        self.backend = backend
        self.claimed = claimed
        self.task = task
        self.max_attempts = backend.max_attempts
        self.lease = backend.lease
        # the queue alias's RETRY_BACKOFF / RETRY_BACKOFF_MAX apply
        self.retry_backoff: float | None = None
        self.retry_backoff_max: float | None = None

    def run(self, payload: dict[str, Any]) -> Any:
        """Run the call and record its outcome in the stored result."""
        result_id = payload["result_id"]
        now = timezone.now()
        started = {"status": str(TaskResultStatus.RUNNING), "last_attempted_at": now.isoformat()}
        if self.claimed.attempts <= 1:
            started["started_at"] = now.isoformat()
        self.backend.write(result_id, started, worker=worker_id())
        result = None
        if task_started.has_listeners(type(self.backend)):
            result = self.backend.get_result(result_id)
        if result is not None:
            task_started.send(type(self.backend), task_result=result)
        args, kwargs = payload.get("args", []), payload.get("kwargs", {})
        try:
            if self.task.takes_context:
                context = TaskContext(task_result=result or self.backend.get_result(result_id))
                value = self.task.call(context, *args, **kwargs)
            else:
                value = self.task.call(*args, **kwargs)
            returned = json.dumps(normalize_json(value))
        except Exception as exc:
            self.failed(result_id, exc)
            raise
        finished = timezone.now().isoformat()
        fields = {"status": str(TaskResultStatus.SUCCESSFUL), "finished_at": finished}
        self.backend.write(result_id, {**fields, "return": returned})
        self.finished(result_id)
        return value

    def failed(self, result_id: str, exc: BaseException) -> None:
        """Record the error; FAILED after the last attempt, READY while retries remain."""
        error = TaskError(
            exception_class_path=f"{type(exc).__module__}.{type(exc).__qualname__}",
            traceback="".join(traceback.format_exception(type(exc), exc, exc.__traceback__)),
        )
        last = self.claimed.attempts >= self.max_attempts
        fields = {"status": str(TaskResultStatus.FAILED if last else TaskResultStatus.READY)}
        if last:
            fields["finished_at"] = timezone.now().isoformat()
        self.backend.write(result_id, fields, error=error_json(error))
        if last:
            self.finished(result_id)

    def finished(self, result_id: str) -> None:
        if task_finished.has_listeners(type(self.backend)):
            result = self.backend.get_result(result_id)
            task_finished.send(type(self.backend), task_result=result)


def django_task_function(claimed: QueueTask) -> DjangoTaskRun:
    """What the worker runs for a claimed task whose payload came from ``RedisTaskBackend``."""
    payload = claimed.payload
    alias = payload.get("backend", "default")
    backend = task_backends[alias]
    if not isinstance(backend, RedisTaskBackend):
        raise TaskNotRegistered(
            f"TASKS[{alias!r}] is not a RedisTaskBackend here, so task {claimed.id!r} "
            f"({payload.get('django_task')!r}) cannot be run by this worker"
        )
    try:
        task = find_task(payload["django_task"])
    except TaskNotRegistered as exc:
        now = timezone.now().isoformat()
        error = TaskError(
            exception_class_path=f"{TaskNotRegistered.__module__}.TaskNotRegistered",
            traceback=str(exc),
        )
        backend.write(
            payload["result_id"],
            {"status": str(TaskResultStatus.FAILED), "finished_at": now},
            error=error_json(error),
        )
        raise
    return DjangoTaskRun(backend, claimed, task)
