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

import asyncio
import functools
import hashlib
import importlib
import importlib.util
import inspect
import json
import math
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Generic, ParamSpec, TypeVar, overload

from django.core.checks import CheckMessage, Error, register
from django.core.exceptions import ImproperlyConfigured
from django.core.serializers.json import DjangoJSONEncoder
from django.db import transaction

from ..conf import DEFAULT_ALIAS
from ..exceptions import InvalidArgument, TaskImportError, TaskNotRegistered
from ..handlers import queues
from ..validation import check_count, check_id, check_name, check_seconds
from .calls import Entry, enqueue_args
from .flow import parse_rate
from .handles import ResultHandle
from .limits import check_limits
from .priority import DEFAULT_PRIORITY, check_priority, enqueue_flag
from .queue import Queue
from .records import micros
from .results import MARKER, Outcome, eager_outcome, marked_sender, marker, send_marked

P = ParamSpec("P")
R = TypeVar("R")


class Enqueued(str, ResultHandle):
    """The id of a call queued with ``@task``: a ``str``, plus whether it was queued.

    It is also the call's handle (:class:`~django_redislock.queue.handles.ResultHandle`):
    ``status``, ``result(timeout)`` and ``result_async(timeout)``.

    ``queued`` is True when the call was queued (or, with ``replace=True``,
    rescheduled), False when a copy with the same id was already queued or
    running and was kept (deduplicated: nothing new will run), and None while
    that is not known: inside ``transaction.atomic()`` the send waits for the
    commit and ``queued`` is filled in then (it stays None after a rollback),
    and in ``EAGER`` mode nothing is queued at all.
    """

    queued: bool | None

    def __new__(
        cls,
        id: str,
        queued: bool | None = None,
        queue: Queue | None = None,
        known: Outcome | None = None,
    ) -> Enqueued:
        made = super().__new__(cls, id)
        made.queued = queued
        made._where = None if queue is None else (queue.backend.alias, queue.name)
        made._known = known
        return made

    def __repr__(self) -> str:
        return f"Enqueued({str(self)!r}, queued={self.queued!r})"


#: Every ``@task`` of this process, by dotted path.
registry: dict[str, TaskFunction[Any, Any]] = {}


class TaskFunction(Generic[P, R]):
    """A function registered with ``@task``: call it directly, or queue it with ``delay``."""

    __name__: str
    __qualname__: str

    def __init__(
        self,
        fn: Callable[P, R],
        *,
        queue: str = "default",
        using: str = DEFAULT_ALIAS,
        max_attempts: int | None = None,
        lease: float | None = None,
        retry_backoff: float | None = None,
        retry_backoff_max: float | None = None,
        unique: bool = False,
        name: str | None = None,
        time_limit: float | None = None,
        soft_time_limit: float | None = None,
        rate_limit: str | None = None,
        priority: int = DEFAULT_PRIORITY,
        store_result: bool | None = None,
        result_ttl: float | None = None,
    ) -> None:
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.path = name or f"{fn.__module__}.{fn.__qualname__}"
        self.queue_name = check_name(queue)
        self.using = using
        self.max_attempts = (
            None
            if max_attempts is None
            else check_count(max_attempts, "max_attempts", allow_zero=False)
        )
        self.lease = None if lease is None else check_seconds(lease, "lease", allow_zero=False)
        self.retry_backoff = (
            None
            if retry_backoff is None
            else check_seconds(retry_backoff, "retry_backoff", allow_zero=True)
        )
        self.retry_backoff_max = (
            None
            if retry_backoff_max is None
            else check_seconds(retry_backoff_max, "retry_backoff_max", allow_zero=True)
        )
        self.unique = unique
        self.time_limit, self.soft_time_limit = check_limits(
            time_limit, soft_time_limit, self.lease
        )
        #: runs of this task across all workers at most this often (see :mod:`.throttle`)
        self.rate_limit = None if rate_limit is None else parse_rate(rate_limit, "rate_limit")
        self.priority = check_priority(priority)
        if store_result is not None and not isinstance(store_result, bool):
            raise InvalidArgument(f"store_result must be True or False, got {store_result!r}")
        self.store_result = store_result
        self.result_ttl = None
        if result_ttl is not None:
            self.result_ttl = check_seconds(result_ttl, "result_ttl", allow_zero=False)
        self._queue: Queue | None = None
        self._signature: inspect.Signature | None = None
        #: (fewest, most) positional arguments that bind without keywords; see check_call
        self._positional: tuple[float, float] = (0, -1)

    def __repr__(self) -> str:
        return f"<task {self.path} queue={self.queue_name!r} using={self.using!r}>"

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.fn(*args, **kwargs)

    @property
    def queue(self) -> Queue:
        """The queue this task is sent to."""
        backend = queues[self.using]
        found = self._queue
        if found is None or found.backend is not backend:  # first use, or settings changed
            found = self._queue = backend.queue(self.queue_name)
        return found

    def delay(self, *args: P.args, **kwargs: P.kwargs) -> Enqueued:
        """Queue a call with these arguments now; returns its id (see :class:`Enqueued`).

        The arguments are bound to the function's signature first: a call the
        function could not take raises ``TypeError`` here and queues nothing.
        """
        self.check_call(args, kwargs)
        # args is a tuple and kwargs a fresh dict: payload()'s checks and copies are moot
        payload = {"task": self.path, "args": list(args), "kwargs": kwargs}
        return self._send(payload, None, 0, False, self.priority)

    def enqueue(
        self,
        args: Sequence[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
        *,
        id: str | None = None,
        delay: float = 0,
        replace: bool = False,
        priority: int | None = None,
    ) -> Enqueued:
        """Queue a call; returns its id (see :class:`Enqueued`). Validation happens now.

        ``priority`` (0-9) overrides the task's ``@task(priority=...)`` for this call.

        ``id`` gives a stable id for deduplication (with ``unique=True`` the id
        is derived from the arguments): ``.queued`` of the result is False when
        a copy with that id was kept instead. Inside ``transaction.atomic()`` the
        send waits for the commit unless ``OPTIONS['COMMIT_MODE']`` is
        ``"immediate"``; with ``OPTIONS['EAGER']`` the call runs inline instead.
        Arguments the function could not take raise ``TypeError``.
        """
        level = self.priority if priority is None else check_priority(priority)
        return self._send(self.payload(args, kwargs), id, delay, replace, level)

    def _send(
        self, payload: dict[str, Any], id: str | None, delay: float, replace: bool, priority: int
    ) -> Enqueued:
        """Validate and queue one envelope (or run it, or wait for the commit); its id.

        The hot path of :meth:`delay`: what :meth:`Queue.prepare
        <django_redislock.queue.Queue.prepare>` checks is checked here too, but the
        enqueue script's ARGV is built directly, without an ``Entry``.
        """
        task_id = self.task_id(payload, id)
        queue = self.queue
        due_in = micros(check_seconds(delay, "delay", allow_zero=True))
        ttl = self.ttl_of_results(queue)
        if ttl is not None:  # after task_id: a unique id does not depend on the generation
            payload = {**payload, MARKER: marker(queue, ttl)}
        data = queue.encode(payload)
        options = queue.backend.options
        if options["EAGER"]:
            value = self.run(queue.serializer.loads(data))
            return Enqueued(task_id, queue=queue, known=eager_outcome(queue, value, ttl))
        flag = enqueue_flag(replace, priority) if priority else "1" if replace else "0"
        args = [flag, task_id, due_in, data]
        sender = queue.send_entries if ttl is None else marked_sender(queue, payload, ttl, due_in)
        if options["COMMIT_MODE"] == "on_commit" and in_transaction():
            result = Enqueued(task_id, queue=queue)

            def send() -> None:
                result.queued = sender(args)[0]

            transaction.on_commit(send)
            return result
        return Enqueued(task_id, sender(args)[0], queue)

    def ttl_of_results(self, queue: Queue) -> float | None:
        """Seconds a result of this task is kept, or None when results are not stored.

        ``store_result``/``result_ttl`` of ``@task``, else the alias's
        ``OPTIONS['STORE_RESULTS']``/``OPTIONS['RESULT_TTL']``.
        """
        options = queue.backend.options
        stores = options["STORE_RESULTS"] if self.store_result is None else self.store_result
        if not stores:
            return None
        return float(options["RESULT_TTL"] if self.result_ttl is None else self.result_ttl)

    def result_of(self, id: str) -> Enqueued:
        """The handle of the call ``id`` of this task (its ``status``, ``result()``)."""
        return Enqueued(check_id(id), queue=self.queue)

    def enqueue_many(
        self,
        calls: Iterable[tuple[Sequence[Any], Mapping[str, Any]]],
        *,
        delay: float = 0,
        batch_size: int = 1000,
        priority: int | None = None,
    ) -> list[Enqueued]:
        """Queue many ``(args, kwargs)`` calls, one round trip per ``batch_size``; their ids.

        Every call is validated (and bound to the signature) before the first
        batch is sent; transactions and eager mode are honoured as in
        :meth:`enqueue`, and each id tells whether it was queued likewise.
        """
        queue = self.queue
        check_count(batch_size, "batch_size", allow_zero=False)
        level = self.priority if priority is None else check_priority(priority)
        ttl = self.ttl_of_results(queue)
        entries, gens = [], []
        for args, kwargs in calls:
            payload = self.payload(args, kwargs)
            task_id = self.task_id(payload, None)
            if ttl is not None:
                payload[MARKER] = marker(queue, ttl)
                gens.append(payload[MARKER]["gen"])
            entries.append(queue.prepare(task_id, payload, delay))
        options = queue.backend.options
        results = [Enqueued(entry.id, queue=queue) for entry in entries]
        if options["EAGER"]:
            for result, entry in zip(results, entries, strict=True):
                value = self.run(queue.serializer.loads(entry.data))
                result._known = eager_outcome(queue, value, ttl)
            return results

        def send_batch(batch: list[Entry], start: int) -> list[bool]:
            if ttl is None:
                return queue.enqueue_prepared(batch, False, level)
            marks = [(e.id, e.data, gens[start + i]) for i, e in enumerate(batch)]
            return send_marked(queue, enqueue_args(batch, False, level), marks, ttl + delay)

        def send() -> None:
            for start in range(0, len(entries), batch_size):
                flags = send_batch(entries[start : start + batch_size], start)
                for result, flag in zip(results[start:], flags, strict=False):
                    result.queued = flag

        if options["COMMIT_MODE"] == "on_commit" and in_transaction():
            transaction.on_commit(send)
        else:
            send()
        return results

    def payload(self, args: Sequence[Any], kwargs: Mapping[str, Any] | None) -> dict[str, Any]:
        """The envelope a worker needs to make the call."""
        if not isinstance(args, (list, tuple)) and (
            isinstance(args, (str, bytes)) or not isinstance(args, Sequence)
        ):
            raise InvalidArgument(f"args must be a list or tuple, got {type(args).__name__}")
        if kwargs is not None and not isinstance(kwargs, Mapping):
            raise InvalidArgument(f"kwargs must be a dict, got {type(kwargs).__name__}")
        args, kwargs = list(args), dict(kwargs or {})
        self.check_call(args, kwargs)
        return {"task": self.path, "args": args, "kwargs": kwargs}

    def check_call(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> None:
        """Raise ``TypeError`` (naming the task) if the function could not take these arguments.

        Checked where the call is queued, so a missing or unexpected argument
        fails in the caller instead of in a worker, retried until dead.
        """
        signature = self._signature
        if signature is None:
            try:
                signature = self._signature = inspect.signature(self.fn)
            except (TypeError, ValueError):  # a callable without a signature: nothing to check
                return
            self._positional = positional_bounds(signature)
        if not kwargs and self._positional[0] <= len(args) <= self._positional[1]:
            return  # the common delay(7, 42): no need for a full bind
        try:
            signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise TypeError(f"{self.path}{signature}: {exc}; nothing was queued") from None

    def task_id(self, payload: dict[str, Any], id: str | None) -> str:
        """The given id, a digest of the call when ``unique``, or a random one."""
        if id is not None:
            return check_id(id)
        if not self.unique:
            return os.urandom(16).hex()  # 128 random bits, like uuid4().hex but cheaper
        try:  # canonical: the same call gives the same id whatever the kwargs order
            data = json.dumps(payload, sort_keys=True, cls=DjangoJSONEncoder).encode()
        except (TypeError, ValueError):  # pickle-only arguments
            data = self.queue.serializer.dumps(payload)
        return f"{self.path}:{hashlib.sha256(data).hexdigest()[:32]}"

    def run(self, payload: Mapping[str, Any]) -> Any:
        """Make the call a payload describes (coroutine functions run in a fresh event loop)."""
        result = self.fn(*payload.get("args", ()), **payload.get("kwargs", {}))
        if inspect.iscoroutine(result):
            return asyncio.run(result)
        return result


def positional_bounds(signature: inspect.Signature) -> tuple[float, float]:
    """How many positional arguments alone bind to ``signature``: ``(fewest, most)``.

    ``(inf, -1)`` (nothing binds without keywords) when a keyword-only parameter
    has no default; ``most`` is infinite with ``*args``.
    """
    fewest, most = 0, 0
    unbounded = False
    for parameter in signature.parameters.values():
        kind = parameter.kind
        if kind in (parameter.POSITIONAL_ONLY, parameter.POSITIONAL_OR_KEYWORD):
            most += 1
            if parameter.default is parameter.empty:
                fewest = most
        elif kind is parameter.VAR_POSITIONAL:
            unbounded = True
        elif kind is parameter.KEYWORD_ONLY and parameter.default is parameter.empty:
            return (math.inf, -1)
    return (fewest, math.inf if unbounded else most)


def in_transaction(using: str | None = None) -> bool:
    """True inside ``transaction.atomic()`` (checked without touching the database)."""
    return bool(transaction.get_connection(using).in_atomic_block)


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
    name: str | None = None,
    time_limit: float | None = None,
    soft_time_limit: float | None = None,
    rate_limit: str | None = None,
    priority: int = DEFAULT_PRIORITY,
    store_result: bool | None = None,
    result_ttl: float | None = None,
) -> Callable[[Callable[P, R]], TaskFunction[P, R]]: ...


def task(fn: Callable[P, R] | None = None, /, **options: Any) -> Any:
    """Register a function as a queue task (``@task`` or ``@task(queue="orders", ...)``).

    ``queue``/``using`` pick the queue and the ``REDISLOCK_QUEUES`` alias;
    ``max_attempts`` overrides ``OPTIONS['MAX_ATTEMPTS']`` for retries; ``lease``
    is how long one run may take before the task is handed out again (default
    ``OPTIONS['VISIBILITY_TIMEOUT']``); ``retry_backoff`` and ``retry_backoff_max``
    override ``OPTIONS['RETRY_BACKOFF']`` and ``OPTIONS['RETRY_BACKOFF_MAX']`` for
    the delay before a failed run is retried; ``unique=True`` derives the id from
    the arguments so the same call is queued once at a time; ``rate_limit``
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
    attempt (see docs/workers.md, "Time limits").
    """

    def register(function: Callable[P, R]) -> TaskFunction[P, R]:
        wrapped = TaskFunction(function, **options)
        registry[wrapped.path] = wrapped
        return wrapped

    return register if fn is None else register(fn)


#: The setting that lists task modules besides the ``tasks`` module of every installed app.
TASK_MODULES_SETTING = "REDISLOCK_TASK_MODULES"
#: Modules of :func:`task_modules` whose last import raised: module -> the error.
broken_modules: dict[str, str] = {}


def task_modules() -> list[str]:
    """The modules a worker may import to find tasks, and only these.

    ``<app>.tasks`` for every installed app that has a ``tasks`` submodule (the
    file is found without importing it), then the dotted module names of the
    ``REDISLOCK_TASK_MODULES`` setting. A payload's path is only ever looked up
    among what these imports registered, never imported itself.
    """
    from django.apps import apps
    from django.conf import settings
    from django.utils.module_loading import module_has_submodule

    found = [
        f"{config.name}.tasks"
        for config in apps.get_app_configs()
        if module_has_submodule(config.module, "tasks")
    ]
    extra = getattr(settings, TASK_MODULES_SETTING, ())
    problem = task_modules_error(extra)
    if problem:
        raise ImproperlyConfigured(problem)
    return found + [name for name in extra if name not in found]


def task_modules_error(value: Any) -> str | None:
    """What is wrong with a ``REDISLOCK_TASK_MODULES`` value (its shape), or None."""
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        return f"{TASK_MODULES_SETTING} must be a list of dotted module names, got {value!r}"
    for i, name in enumerate(value):
        parts = name.split(".") if isinstance(name, str) else [""]
        if not all(part.isidentifier() for part in parts):
            return f"{TASK_MODULES_SETTING}[{i}] must be a dotted module name, got {name!r}"
    return None


def import_task_module(module: str) -> None:
    """Import one of :func:`task_modules`; raises ``TaskImportError`` (and remembers it)."""
    try:
        importlib.import_module(module)
    except Exception as exc:
        broken_modules[module] = f"{type(exc).__name__}: {exc}"
        raise TaskImportError(f"importing task module {module!r} failed: {exc!r}") from exc
    broken_modules.pop(module, None)


def autodiscover() -> dict[str, str]:
    """Import every task module; returns the ones that raised (module -> error), never raises.

    A module that fails is left for :func:`resolve` to try again when a task
    needs it, so one broken module stops only its own tasks (they are retried
    with backoff), not the worker.
    """
    broken = {}
    for module in task_modules():
        try:
            import_task_module(module)
        except TaskImportError:
            broken[module] = broken_modules[module]
    return broken


def owner_module(path: str, modules: Iterable[str]) -> str | None:
    """The task module that ``path`` lies in (the longest one that is a prefix), or None."""
    owners = [module for module in modules if path.startswith(module + ".")]
    return max(owners, key=len) if owners else None


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


@register("redislock")
def check_task_modules(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """``redislock.E020``: ``REDISLOCK_TASK_MODULES`` is not a list of modules that exist.

    The modules are located, not imported (importing runs their code; a module
    that raises is the worker's business: its tasks are retried).
    """
    from django.conf import settings

    value = getattr(settings, TASK_MODULES_SETTING, None)
    if value is None:
        return []
    hint = f"{TASK_MODULES_SETTING} = ['myproject.jobs']: modules whose @task functions run"
    problem = task_modules_error(value)
    if problem:
        return [Error(problem, hint=hint, id="redislock.E020")]
    errors: list[CheckMessage] = []
    for i, name in enumerate(value):
        try:
            spec = importlib.util.find_spec(name)
        except Exception as exc:  # a parent package that fails to import or is not a package
            spec, why = None, f": {exc!r}"
        else:
            why = ""
        if spec is None:
            errors.append(
                Error(
                    f"{TASK_MODULES_SETTING}[{i}]: no module named {name!r}{why}",
                    hint=hint,
                    id="redislock.E020",
                )
            )
    return errors
