"""The ``@task`` decorator and the registry that workers resolve task paths with.

A task is registered under its dotted path (``module.qualname``); the payload
of a queued call is ``{"task": path, "args": [...], "kwargs": {...}}``, and a
worker of another process finds the function in its own registry. Only
registered functions run: a payload can never name an arbitrary callable.

A worker imports only the task modules (:func:`task_modules`: the ``tasks``
module of every installed app and the modules of ``REDISLOCK_TASK_MODULES``),
never a module named by a payload. How it treats a path it cannot resolve (see
:func:`resolve`):

* the function is not registered by any task module (deleted or renamed in a
  new deploy, or a payload naming something else):
  :class:`~django_redislock.exceptions.TaskNotRegistered`; the worker
  dead-letters that task with the message and keeps running;
* importing its task module raises (a syntax error, a failing import inside it,
  a missing dependency): :class:`~django_redislock.exceptions.TaskImportError`;
  the worker retries that task with backoff, since a later deploy may fix the
  module, and goes on with the others.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar, overload

from ..conf import DEFAULT_ALIAS
from ..exceptions import TaskImportError, TaskNotRegistered
from .call_options import in_transaction
from .discovery import (
    TASK_MODULES_SETTING,
    autodiscover,
    broken_modules,
    check_task_modules,
    import_task_module,
    owner_module,
    task_modules,
    task_modules_error,
)
from .handles import Enqueued
from .priority import DEFAULT_PRIORITY
from .task_checks import positional_bounds
from .task_function import TaskFunction

__all__ = [
    "TASK_MODULES_SETTING",
    "Enqueued",
    "TaskFunction",
    "autodiscover",
    "broken_modules",
    "check_task_modules",
    "import_task_module",
    "in_transaction",
    "owner_module",
    "positional_bounds",
    "queues_of",
    "registry",
    "resolve",
    "task",
    "task_modules",
    "task_modules_error",
]

P = ParamSpec("P")
R = TypeVar("R")

#: Every ``@task`` of this process, by dotted path.
registry: dict[str, TaskFunction[Any, Any]] = {}


@overload
def task(fn: Callable[P, R], /) -> TaskFunction[P, R]: ...


@overload
def task(
    *,
    queue: str = "default",
    using: str = DEFAULT_ALIAS,
    max_attempts: int | None = None,
    lease: float | None = None,
    retry_backoff: float | None = None,
    retry_backoff_max: float | None = None,
    unique: bool = False,
    unique_for: float | None = None,
    name: str | None = None,
    time_limit: float | None = None,
    soft_time_limit: float | None = None,
    rate_limit: str | None = None,
    priority: int = DEFAULT_PRIORITY,
    store_result: bool | None = None,
    result_ttl: float | None = None,
    retry_on: tuple[type[BaseException], ...] | None = None,
    dont_retry_on: tuple[type[BaseException], ...] = (),
    retry_jitter: bool | None = None,
    group_key: Callable[..., str] | None = None,
    group_concurrency: int | None = None,
    group_rate_limit: str | None = None,
) -> Callable[[Callable[P, R]], TaskFunction[P, R]]: ...


def task(fn: Callable[P, R] | None = None, /, **options: Any) -> Any:
    """Register a function as a queue task (``@task`` or ``@task(queue="orders", ...)``).

    ``queue``/``using`` pick the queue and the ``REDISLOCK_QUEUES`` alias;
    ``max_attempts`` overrides ``OPTIONS['MAX_ATTEMPTS']`` for retries; ``lease``
    is how long one run may take before the task is handed out again (default
    ``OPTIONS['VISIBILITY_TIMEOUT']``); ``retry_backoff`` and ``retry_backoff_max``
    override ``OPTIONS['RETRY_BACKOFF']`` and ``OPTIONS['RETRY_BACKOFF_MAX']`` for
    the delay before a failed run is retried; ``unique=True`` derives the id from
    the arguments so the same call is queued once at a time, and ``unique_for=seconds``
    (implies ``unique``) also refuses it for that long after a run of it succeeded
    (``.queued`` False, ``.refused`` says why; docs/queue.md, "Unique for a while"); ``rate_limit``
    (``"10/s"``, ``"100/m"``, ``"5/h"``) bounds how often it runs across all
    ``drain_queue`` workers (tasks over it wait in the queue, uncharged);
    ``priority`` (0, the default and lowest, to 9) is the level its calls are queued
    at (``enqueue(..., priority=)`` overrides it per call). ``store_result=True``
    keeps the return value (or the error of a dead-lettered call) for ``result_ttl``
    seconds for the handle ``delay()`` returns (defaults: ``OPTIONS['STORE_RESULTS']``
    and ``OPTIONS['RESULT_TTL']``). ``time_limit`` and ``soft_time_limit`` (seconds)
    bound one run (default ``OPTIONS['TASK_TIME_LIMIT']`` and
    ``OPTIONS['TASK_SOFT_TIME_LIMIT']``): past the soft one ``SoftTimeLimitExceeded`` is
    raised inside the run, past the hard one it is ended and recorded as a failed
    attempt (see docs/workers.md, "Time limits"). ``retry_on`` (exception classes: only
    these failures are retried), ``dont_retry_on`` (these are dead-lettered at once) and
    ``retry_jitter`` (``OPTIONS['RETRY_JITTER']`` for this task) shape its retries; inside a
    run, ``raise Retry(countdown=, max_retries=)`` asks for one (docs/queue.md, "A task's
    control over its retries"). ``group_key`` (a callable given the call's arguments, which
    returns its group, e.g. a tenant) puts its calls in concurrency groups: at most
    ``group_concurrency`` (default 1) of a group are ready or running at a time, admitted at
    most ``group_rate_limit`` often, and groups take turns, so one group's backlog never
    starves another's (docs/queue.md, "Concurrency groups").
    """

    def register(function: Callable[P, R]) -> TaskFunction[P, R]:
        wrapped = TaskFunction(function, **options)
        registry[wrapped.path] = wrapped
        return wrapped

    return register if fn is None else register(fn)


def resolve(path: str) -> TaskFunction[Any, Any]:
    """The registered task ``path``; imports nothing but :func:`task_modules`.

    * registered already (its module was imported by this process): that task;
    * ``path`` lies in a task module (``shop.tasks.create_order`` in ``shop.tasks``):
      that module is imported, and its failure raises ``TaskImportError``;
    * any other path (a custom ``@task(name=...)``): every task module not yet
      imported is imported; if one of them fails, ``TaskImportError`` (the task
      may be in it);
    * otherwise ``TaskNotRegistered``: the path is never imported, so a payload
      naming ``os.system`` or ``this.anything`` imports nothing.
    """
    found = registry.get(path)
    if found is not None:
        return found
    modules = task_modules()
    owner = owner_module(path, modules)
    if owner is not None:
        import_task_module(owner)
    else:
        broken = autodiscover()
        if path not in registry and broken:
            raise TaskImportError(
                f"no @task is registered as {path!r}, and task modules failed to import: "
                + "; ".join(f"{name}: {error}" for name, error in sorted(broken.items()))
            )
    found = registry.get(path)
    if found is None:
        where = f"in {owner!r}" if owner else f"in the task modules ({', '.join(modules)})"
        raise TaskNotRegistered(
            f"no @task is registered as {path!r} {where} (was it deleted or renamed? "
            f"only the tasks modules of installed apps and {TASK_MODULES_SETTING} are imported)"
        )
    return found


def queues_of(alias: str) -> list[str]:
    """Names of the queues that registered tasks of ``alias`` send to."""
    return sorted({fn.queue_name for fn in registry.values() if fn.using == alias})
