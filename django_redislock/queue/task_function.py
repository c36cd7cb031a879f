"""``TaskFunction``: a function registered with ``@task``, and how its calls are queued.

``delay``/``enqueue``/``enqueue_many`` bind the arguments to the function's
signature, build the payload envelope and send it (now, after the current
transaction commits, or inline in ``EAGER`` mode); the registry of every
``@task`` of the process is in :mod:`.registry`.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import inspect
import json
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, Generic, ParamSpec, TypeVar

from django.core.serializers.json import DjangoJSONEncoder
from django.db import transaction

from ..conf import DEFAULT_ALIAS
from ..exceptions import InvalidArgument
from ..handlers import queues
from ..validation import (
    check_bool,
    check_count,
    check_id,
    check_limits,
    check_name,
    check_seconds,
    parse_rate,
)
from .call_options import EXPIRES, delay_of, expiry_of, in_transaction, send_async
from .canvas import Signature
from .groups import check_group, group_args, send_grouped
from .handles import Enqueued
from .priority import DEFAULT_PRIORITY, check_priority, enqueue_flag
from .queue import Queue
from .records import Entry, micros
from .results import MARKER, eager_outcome, marked_sender, marker
from .task_batches import send_many
from .task_checks import check_exceptions, positional_bounds
from .workflows import MARK, chord_inputs

P = ParamSpec("P")
R = TypeVar("R")


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
        #: seconds after a successful run during which the same id is refused (None: none)
        self.unique_for = (
            None
            if unique_for is None
            else check_seconds(unique_for, "unique_for", allow_zero=False)
        )
        self.unique = unique or self.unique_for is not None
        self.time_limit, self.soft_time_limit = check_limits(
            time_limit, soft_time_limit, self.lease
        )
        #: runs of this task across all workers at most this often (see :mod:`.throttle`)
        self.rate_limit = None if rate_limit is None else parse_rate(rate_limit, "rate_limit")
        self.priority = check_priority(priority)
        self.store_result = (
            None if store_result is None else check_bool(store_result, "store_result")
        )
        self.result_ttl = None
        if result_ttl is not None:
            self.result_ttl = check_seconds(result_ttl, "result_ttl", allow_zero=False)
        #: failures retried (None: all but ``dont_retry_on``) and those dead-lettered at once
        self.retry_on = None if retry_on is None else check_exceptions(retry_on, "retry_on")
        self.dont_retry_on = check_exceptions(dont_retry_on, "dont_retry_on")
        self.retry_jitter = (
            None if retry_jitter is None else check_bool(retry_jitter, "retry_jitter")
        )
        #: its concurrency group (docs/queue.md, "Concurrency groups"), None without
        self.group = check_group(group_key, group_concurrency, group_rate_limit)
        if self.group is not None and self.unique_for is not None:
            raise InvalidArgument("group_key cannot be combined with unique_for (not supported)")
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
        if kwargs and "depends_on" in kwargs and not self._takes("depends_on"):
            deps = kwargs.pop("depends_on")
            handle: Any = self.s(*args, **kwargs).delay(depends_on=deps)  # type: ignore[arg-type]
            return handle  # type: ignore[no-any-return]  # a WorkflowHandle (docs/workflows.md)
        self.check_call(args, kwargs)
        # args is a tuple and kwargs a fresh dict: payload()'s checks and copies are moot
        payload = {"task": self.path, "args": list(args), "kwargs": kwargs}
        if self.priority or self.unique or self.group is not None:  # unique_for: unique too
            return self._send(payload, None, 0, False, self.priority)  # due now: 0 µs
        queue = self.queue
        options = queue.backend.options
        stores = options["STORE_RESULTS"] if self.store_result is None else self.store_result
        if (
            stores
            or options["EAGER"]
            or (options["COMMIT_MODE"] == "on_commit" and in_transaction())
        ):
            return self._send(payload, None, 0, False, 0)
        # the common call: a random id (as task_id() makes it), sent now (Queue.send_one)
        task_id = os.urandom(16).hex()
        code = queue.send_one(task_id, queue.encode(payload))
        return Enqueued(task_id, queue=queue)._set_code(code)

    def s(self, *args: Any, **kwargs: Any) -> Signature:
        """A signature of this call for :func:`chain`, :func:`group`, :func:`chord` (or its
        own ``delay(depends_on=...)``): nothing is sent yet (docs/workflows.md)."""
        return Signature(self, args, kwargs)

    def _takes(self, name: str) -> bool:
        """Whether the function has a parameter ``name`` (then ``delay`` passes it on)."""
        try:
            return name in inspect.signature(self.fn).parameters
        except (TypeError, ValueError):
            return False

    def delay_on(self, queue: str, /, *args: P.args, **kwargs: P.kwargs) -> Enqueued:
        """:meth:`delay` to another queue of the task's alias, for this call only.

        ``queue`` is positional-only, so the task's own arguments may use the name.
        """
        self.check_call(args, kwargs)
        payload = {"task": self.path, "args": list(args), "kwargs": kwargs}
        return self._send(payload, None, 0, False, self.priority, queue=self.queue_named(queue))

    async def delay_async(self, *args: P.args, **kwargs: P.kwargs) -> Enqueued:
        """The asyncio twin of :meth:`delay` (its enqueue goes over the asyncio client)."""
        self.check_call(args, kwargs)
        payload = {"task": self.path, "args": list(args), "kwargs": kwargs}
        return await send_async(self, payload)

    def queue_named(self, name: str | None) -> Queue:
        """The queue ``name`` of the task's alias (None: the task's own queue)."""
        if name is None:
            return self.queue
        found: Queue = queues[self.using].queue(check_name(name))
        return found

    def enqueue(
        self,
        args: Sequence[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
        *,
        id: str | None = None,
        delay: float = 0,
        replace: bool = False,
        priority: int | None = None,
        eta: datetime | None = None,
        expires: float | datetime | None = None,
        queue: str | None = None,
    ) -> Enqueued:
        """Queue a call; returns its id (see :class:`Enqueued`). Validation happens now.

        ``priority`` (0-9) overrides the task's ``@task(priority=...)`` for this call;
        ``queue`` its queue (of the same alias). ``eta`` (a datetime) is when it is due,
        instead of ``delay``; ``expires`` (seconds from now, or a datetime) is when it is
        too late to start it: a call no worker started by then never runs and is
        dead-lettered as ``expired`` (docs/queue.md, "Expiry").

        ``id`` gives a stable id for deduplication (with ``unique=True`` the id
        is derived from the arguments): ``.queued`` of the result is False when
        a copy with that id was kept instead. Inside ``transaction.atomic()`` the
        send waits for the commit unless ``OPTIONS['COMMIT_MODE']`` is
        ``"immediate"``; with ``OPTIONS['EAGER']`` the call runs inline instead.
        Arguments the function could not take raise ``TypeError``.
        """
        level = self.priority if priority is None else check_priority(priority)
        target = self.queue_named(queue)
        seconds = check_seconds(delay_of(delay, eta), "delay", allow_zero=True)
        at = expiry_of(expires, seconds)
        payload = self.payload(args, kwargs)
        return self._send(payload, id, micros(seconds), replace, level, queue=target, expires=at)

    def _send(
        self,
        payload: dict[str, Any],
        id: str | None,
        due_in: int,
        replace: bool,
        priority: int,
        *,
        queue: Queue | None = None,
        expires: float | None = None,
    ) -> Enqueued:
        """Validate and queue one envelope (or run it, or wait for the commit); its id.

        ``due_in``: microseconds from now, already checked (:meth:`delay` sends 0).
        The hot path of :meth:`delay`: what :meth:`Queue.prepare
        <django_redislock.queue.Queue.prepare>` checks is checked here too, but the
        enqueue script's ARGV is built directly, without an ``Entry``.
        """
        # the common case, a random id, inline (task_id() makes it the same way)
        fresh = id is None and not self.unique
        task_id = os.urandom(16).hex() if fresh else self.task_id(payload, id)
        if queue is None:
            queue = self.queue
        group = None if self.group is None else self.group.group_of(*self.call_of(payload))
        if expires is not None:  # after task_id: a unique id does not depend on it
            payload = {**payload, EXPIRES: expires}
        ttl = self.ttl_of_results(queue)
        if ttl is not None:  # after task_id: a unique id does not depend on the generation
            payload = {**payload, MARKER: marker(queue, ttl)}
        data = queue.encode(payload)
        options = queue.backend.options
        if options["EAGER"]:
            value = self.run(queue.serializer.loads(data))
            return Enqueued(task_id, queue=queue, known=eager_outcome(queue, value, ttl))
        flag = enqueue_flag(replace, priority) if priority else "1" if replace else "0"
        if self.unique_for is not None:
            flag = "u" + flag
        args = [flag, task_id, due_in, data]
        sender = self._sender(queue, payload, ttl, due_in)
        if group is not None and self.group is not None:
            args = group_args(flag, self.group.limits, [(Entry(task_id, due_in, data), group)])
            sender = self._group_sender(queue, payload, ttl, due_in)
        if options["COMMIT_MODE"] == "on_commit" and in_transaction():
            result = Enqueued(task_id, queue=queue)

            def send() -> None:
                result._set_code(sender(args)[0])

            transaction.on_commit(send)
            return result
        return Enqueued(task_id, queue=queue)._set_code(sender(args)[0])

    def _sender(
        self, queue: Queue, payload: dict[str, Any], ttl: float | None, due_in: int
    ) -> Callable[[list[Any]], Sequence[int]]:
        """What sends one call's enqueue ARGV: plain, checking ``unique_for``, or marked."""
        if ttl is not None:
            return marked_sender(queue, payload, ttl, due_in)
        return queue.send_unique if self.unique_for is not None else queue.send_entries

    def _group_sender(
        self, queue: Queue, payload: dict[str, Any], ttl: float | None, due_in: int
    ) -> Callable[[list[Any]], Sequence[int]]:
        """What sends one grouped call's ARGV (see :func:`.groups.group_args`)."""
        if ttl is None:
            return lambda args: send_grouped(queue, args)
        return marked_sender(queue, payload, ttl, due_in, grouped=True)

    @staticmethod
    def call_of(payload: Mapping[str, Any]) -> tuple[Sequence[Any], Mapping[str, Any]]:
        """The ``(args, kwargs)`` of an envelope."""
        return payload.get("args", ()), payload.get("kwargs", {})

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
        return send_many(self, calls, delay, batch_size, priority)

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
        args = payload.get("args", ())
        mark = payload.get(MARK)
        if mark is not None and "in" in mark:  # a chord's callback: its members' results first
            inputs = chord_inputs(self.queue_named(mark["q"]), mark["id"], int(mark["in"]))
            args = [inputs, *args]
        result = self.fn(*args, **payload.get("kwargs", {}))
        if inspect.iscoroutine(result):
            return asyncio.run(result)
        return result
