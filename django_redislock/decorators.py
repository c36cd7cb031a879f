"""``@distributed_lock``: one object that is both a decorator and a context manager.

::

    @distributed_lock("order:{order_id}", ttl=30, timeout=0)
    def pay(request, order_id): ...

    @distributed_lock("user:{request.user.pk}")          # attribute access works
    class ProfileView(View): ...                           # wraps dispatch()

    class Command(BaseCommand):
        @distributed_lock("nightly-report", on_locked="skip")
        def handle(self, *args, **options): ...

    with distributed_lock("rebuild-index"):                # a context manager too
        ...

The name is a :meth:`str.format` template filled from the call's arguments as
:func:`inspect.signature` binds them (``**kwargs`` are flattened, so a class
view's URL kwargs are available), or a callable given the call's arguments.

When the lock stays taken for the whole wait, ``on_locked`` decides:

* ``"raise"``: raise :class:`~django_redislock.exceptions.LockNotAcquired`;
* ``"skip"``: do not call the function, return ``None``;
* ``"response"``: return an HTTP 423 (Locked) response with ``Retry-After`` set
  to the holder's remaining TTL in whole seconds;
* a callable ``on_locked(lock, *args, **kwargs)``: its result is returned.

The default (``None``) is ``"response"`` when an argument of the call is an
``HttpRequest`` (a view) and ``"raise"`` otherwise. As a context manager the
lock always raises when it is not acquired: a ``with`` body cannot be skipped.

``owner`` names the holder instead of a random per-hold token: a string, a
callable given the call's arguments, or ``"celery"`` for the id of the Celery
task being run (see :mod:`django_redislock.celery`). Anyone who knows the owner
can then release the hold from another process
(``locks[alias].lock(name, owner=...).release()``), for example the next
attempt of a task whose worker died.
"""

from __future__ import annotations

import functools
import inspect
import math
import string
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any, ParamSpec, TypeVar, cast, overload

from .exceptions import InvalidArgument
from .locks.base import BaseLock
from .locks.keys import check_name

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T", bound=type)

ON_LOCKED = ("raise", "skip", "response")
_formatter = string.Formatter()


class distributed_lock:
    """Hold a distributed lock around a call or a ``with`` block; see the module docs."""

    def __init__(
        self,
        name: str | Callable[..., str],
        *,
        using: str = "default",
        ttl: float | None = None,
        timeout: float | None = None,
        blocking: bool = True,
        on_locked: str | Callable[..., Any] | None = None,
        reentrant: bool = False,
        watchdog: bool | None = None,
        owner: str | Callable[..., str] | None = None,
    ) -> None:
        if not callable(name):
            check_template(name)
        if not isinstance(using, str) or not using:
            raise InvalidArgument(f"using must be an alias name, not {using!r}")
        if on_locked is not None and not callable(on_locked) and on_locked not in ON_LOCKED:
            raise InvalidArgument(
                f"on_locked must be one of {', '.join(ON_LOCKED)} or a callable, not {on_locked!r}"
            )
        if not isinstance(blocking, bool):
            raise InvalidArgument(f"blocking must be True or False, not {blocking!r}")
        if owner is not None and not callable(owner) and (not isinstance(owner, str) or not owner):
            raise InvalidArgument(f"owner must be a string, a callable or 'celery', not {owner!r}")
        self.owner = owner
        self.name = name
        self.using = using
        self.blocking = blocking
        self.on_locked = on_locked
        self.lock_kwargs: dict[str, Any] = {
            "ttl": ttl,
            "timeout": timeout,
            "reentrant": reentrant,
            "watchdog": watchdog,
        }
        self._held: ContextVar[tuple[BaseLock, ...]] = ContextVar(f"distributed_lock_{id(self)}")

    def __repr__(self) -> str:
        return f"<distributed_lock {self.name!r} using={self.using!r}>"

    # -- building the lock for one call ----------------------------------------------------

    def lock_for(self, name: str, owner: str | None = None) -> BaseLock:
        """A fresh lock object for ``name`` on the ``using`` alias (held as ``owner``)."""
        from .handlers import locks

        extra = {} if owner is None else {"owner": owner}
        lock: BaseLock = locks[self.using].lock(name, **self.lock_kwargs, **extra)
        return lock

    def resolve_owner(self, args: Any, kwargs: Any) -> str | None:
        """The owner of one call's hold: ``None`` (a random token), a string, or computed."""
        if self.owner is None:
            return None
        if self.owner == "celery":
            from .celery import current_task_id

            return current_task_id()
        if callable(self.owner):
            return self.owner(*args, **kwargs)
        return self.owner

    def resolve_name(self, func: Callable[..., Any] | None, args: Any, kwargs: Any) -> str:
        """The lock name for one call: the template filled from the bound arguments."""
        if callable(self.name):
            return check_name(self.name(*args, **kwargs), "the name callable's result")
        if func is None or "{" not in self.name:
            if "{" in self.name:
                raise InvalidArgument(
                    f"name template {self.name!r} has fields, which need a decorated call "
                    f"to fill them; as a context manager give a plain name"
                )
            return self.name
        values = bound_arguments(func, args, kwargs)
        try:
            filled = _formatter.vformat(self.name, tuple(args), values)
        except (KeyError, IndexError, AttributeError) as exc:
            raise InvalidArgument(
                f"name template {self.name!r} cannot be filled from the arguments of "
                f"{getattr(func, '__qualname__', func)!r}: {exc!r}"
            ) from exc
        return check_name(filled, "the filled name template")

    # -- decorator -------------------------------------------------------------------------

    @overload
    def __call__(self, func: T) -> T: ...

    @overload
    def __call__(self, func: Callable[P, R]) -> Callable[P, R]: ...

    def __call__(self, func: Any) -> Any:
        if isinstance(func, type):
            return self._decorate_class(func)
        if not callable(func):
            raise InvalidArgument(f"distributed_lock decorates callables, not {func!r}")
        if inspect.iscoroutinefunction(func):
            return self._wrap_async(func)
        return self._wrap_sync(func)

    def _decorate_class(self, cls: T) -> T:
        for method in ("dispatch", "handle"):
            if callable(getattr(cls, method, None)):
                setattr(cls, method, self(getattr(cls, method)))
                return cls
        raise InvalidArgument(
            f"distributed_lock can decorate a class with a dispatch() (a view) or a handle() "
            f"(a management command); {cls.__qualname__} has neither"
        )

    def _wrap_sync(self, func: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(func)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            name = self.resolve_name(func, args, kwargs)
            lock = self.lock_for(name, self.resolve_owner(args, kwargs))
            if not lock.acquire(blocking=self.blocking):
                return cast(R, self._when_locked(lock, lock_pttl(lock), args, kwargs))
            try:
                return func(*args, **kwargs)
            finally:
                lock.release()

        return wrapper

    def _wrap_async(self, func: Callable[P, Any]) -> Callable[P, Any]:
        @functools.wraps(func)
        async def wrapper(*args: P.args, **kwargs: P.kwargs) -> Any:
            name = self.resolve_name(func, args, kwargs)
            lock = self.lock_for(name, self.resolve_owner(args, kwargs))
            if not await lock.acquire_async(blocking=self.blocking):
                return self._when_locked(lock, await lock_pttl_async(lock), args, kwargs)
            try:
                return await func(*args, **kwargs)
            finally:
                await lock.release_async()

        return wrapper

    def _when_locked(self, lock: BaseLock, pttl: int, args: Any, kwargs: Any) -> Any:
        action = self.on_locked
        if action is None:
            action = "response" if _has_request(args, kwargs) else "raise"
        if callable(action):
            return action(lock, *args, **kwargs)
        if action == "skip":
            return None
        if action == "response":
            return locked_response(lock.name, pttl)
        raise lock._not_acquired()

    # -- context manager -------------------------------------------------------------------

    def _enter(self, lock: BaseLock) -> BaseLock:
        self._held.set((*self._held.get(()), lock))
        return lock

    def _exit(self) -> BaseLock:
        *rest, lock = self._held.get()
        self._held.set(tuple(rest))
        return lock

    def __enter__(self) -> BaseLock:
        lock = self.lock_for(self.resolve_name(None, (), {}), self.resolve_owner((), {}))
        if not lock.acquire(blocking=self.blocking):
            raise lock._not_acquired()
        return self._enter(lock)

    def __exit__(self, *exc_info: object) -> None:
        self._exit().release()

    async def __aenter__(self) -> BaseLock:
        lock = self.lock_for(self.resolve_name(None, (), {}), self.resolve_owner((), {}))
        if not await lock.acquire_async(blocking=self.blocking):
            raise lock._not_acquired()
        return self._enter(lock)

    async def __aexit__(self, *exc_info: object) -> None:
        await self._exit().release_async()


def check_template(name: Any) -> None:
    """Raise :class:`InvalidArgument` unless ``name`` is a usable name or name template."""
    if not isinstance(name, str):
        raise InvalidArgument(f"name must be a str or a callable, not {type(name).__name__}")
    try:
        fields = [field for _, field, _, _ in _formatter.parse(name) if field is not None]
    except ValueError as exc:
        raise InvalidArgument(f"name template {name!r} is malformed: {exc}") from exc
    if not fields:
        check_name(name)
    elif not name.strip():
        raise InvalidArgument("name must be a non-empty string")


def bound_arguments(func: Callable[..., Any], args: Any, kwargs: Any) -> dict[str, Any]:
    """The call's arguments by parameter name, with ``**kwargs`` flattened in."""
    try:
        bound = inspect.signature(func).bind(*args, **kwargs)
    except TypeError as exc:
        raise TypeError(f"{getattr(func, '__qualname__', func)}(): {exc}") from exc
    bound.apply_defaults()
    values = dict(bound.arguments)
    for param in inspect.signature(func).parameters.values():
        if param.kind is inspect.Parameter.VAR_KEYWORD:
            values.update(values.pop(param.name, {}))
    return values


def _has_request(args: Any, kwargs: Any) -> bool:
    from django.http import HttpRequest

    return any(isinstance(value, HttpRequest) for value in (*args, *kwargs.values()))


def locked_response(name: str, pttl_ms: int) -> Any:
    """An HTTP 423 (Locked) response whose ``Retry-After`` is the holder's remaining TTL."""
    from django.http import HttpResponse

    response = HttpResponse(f"Locked: {name} is busy, retry later.\n", status=423)
    response["Retry-After"] = str(max(1, math.ceil(pttl_ms / 1000)))
    return response


def lock_pttl(lock: BaseLock) -> int:
    """The current holder's remaining TTL in ms (0 when unknown)."""
    key = getattr(lock, "_key", None)
    if key is None:
        return 0
    with lock.backend.errors():
        return max(0, int(lock.backend.client.pttl(key)))


async def lock_pttl_async(lock: BaseLock) -> int:
    """The asyncio twin of :func:`lock_pttl`."""
    key = getattr(lock, "_key", None)
    if key is None:
        return 0
    with lock.backend.errors():
        return max(0, int(await lock.backend.async_client().pttl(key)))
