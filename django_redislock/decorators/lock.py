"""``distributed_lock``: the decorator and context manager (see the package's docs)."""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import Callable
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar, cast, overload

from asgiref.sync import iscoroutinefunction

from ..exceptions import InvalidArgument, LockLost
from ..locking.base import BaseLock
from ..locking.names import fill, safe_name
from ..locking.semaphore import MAX_PERMITS
from ..validation import check_bool, check_int
from .names import BadLockName, bound_arguments, check_template, named_owners
from .responses import (
    has_request,
    lock_pttl,
    lock_pttl_async,
    locked_response,
    lost_response,
    request_of,
)

if TYPE_CHECKING:
    from ..handlers import LockHandler

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T", bound=type)

ON_LOCKED = ("raise", "skip", "response")
ON_RELEASE_LOST = ("raise", "ignore", "response")
logger = logging.getLogger("django_redislock.decorators")


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
        on_release_lost: str | Callable[..., Any] | None = None,
        permits: int | None = None,
    ) -> None:
        if not callable(name):
            check_template(name)
        if not isinstance(using, str) or not using:
            raise InvalidArgument(f"using must be an alias name, not {using!r}")
        if on_locked is not None and not callable(on_locked) and on_locked not in ON_LOCKED:
            raise InvalidArgument(
                f"on_locked must be one of {', '.join(ON_LOCKED)} or a callable, not {on_locked!r}"
            )
        if (
            on_release_lost is not None
            and not callable(on_release_lost)
            and on_release_lost not in ON_RELEASE_LOST
        ):
            raise InvalidArgument(
                f"on_release_lost must be one of {', '.join(ON_RELEASE_LOST)} or a callable, "
                f"not {on_release_lost!r}"
            )
        check_bool(blocking, "blocking")
        if owner is not None and not callable(owner) and (not isinstance(owner, str) or not owner):
            raise InvalidArgument(f"owner must be a string, a callable or 'celery', not {owner!r}")
        if permits is not None:
            check_int(permits, "permits", 0, MAX_PERMITS)
            if reentrant:
                raise InvalidArgument("permits and reentrant cannot go together")
        self.permits = permits
        self.owner = owner
        self.name = name
        self.using = using
        self.blocking = blocking
        self.on_locked = on_locked
        self.on_release_lost = on_release_lost
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
        locks = _locks or _import_locks()
        kwargs = self.lock_kwargs if owner is None else {**self.lock_kwargs, "owner": owner}
        if self.permits is not None:  # a permit of the semaphore ``name``
            kwargs = {key: value for key, value in kwargs.items() if key != "reentrant"}
            return locks[self.using].semaphore(name, self.permits, **kwargs).permit()
        return locks[self.using].lock(name, **kwargs)

    def resolve_owner(self, args: Any, kwargs: Any) -> str | None:
        """The owner of one call's hold: ``None`` (a random token), a string, or computed."""
        if self.owner is None:
            return None
        if isinstance(self.owner, str) and self.owner in named_owners:
            return named_owners[self.owner]()
        if callable(self.owner):
            return self.owner(*args, **kwargs)
        return self.owner

    def resolve_name(self, func: Callable[..., Any] | None, args: Any, kwargs: Any) -> str:
        """The lock name for one call: the template filled from the bound arguments.

        Filled-in values are escaped so that any string makes a usable name (see
        :mod:`django_redislock.locking.names`); a value that is not valid text raises
        :class:`BadLockName`. A template the arguments cannot fill raises
        :class:`InvalidArgument` (a programming error).
        """
        if callable(self.name):
            value = self.name(*args, **kwargs)
            if not isinstance(value, str):
                raise InvalidArgument(
                    f"the name callable's result must be a str, not {type(value).__name__}"
                )
            try:
                return safe_name(value, "the name callable's result")
            except InvalidArgument as exc:
                raise BadLockName(str(exc)) from exc
        if func is None or "{" not in self.name:
            if "{" in self.name:
                raise InvalidArgument(
                    f"name template {self.name!r} has fields, which need a decorated call "
                    f"to fill them; as a context manager give a plain name"
                )
            return self.name
        values = bound_arguments(func, args, kwargs)
        try:
            return fill(self.name, args, values)
        except (KeyError, IndexError, AttributeError) as exc:
            raise InvalidArgument(
                f"name template {self.name!r} cannot be filled from the arguments of "
                f"{getattr(func, '__qualname__', func)!r}: {exc!r}"
            ) from exc
        except InvalidArgument as exc:
            raise BadLockName(f"the name gives no usable lock name: {exc}") from exc

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
        if iscoroutinefunction(func):
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
            if _async_view_dispatch(func, args):
                # An async class-based view: dispatch() returns the handler's coroutine,
                # which must run while the lock is held, and the event loop must not block.
                return cast(R, self._call_async(func, args, kwargs))
            try:
                name = self.resolve_name(func, args, kwargs)
            except BadLockName as exc:
                return cast(R, self._bad_name(exc, args, kwargs))
            lock = self.lock_for(name, self.resolve_owner(args, kwargs))
            if not lock.acquire(blocking=self.blocking):
                return cast(R, self._when_locked(lock, lock_pttl(lock), args, kwargs))
            try:
                result = func(*args, **kwargs)
            except BaseException:
                _release_after_error(lock)
                raise
            try:
                lock.release()
            except LockLost as exc:
                return cast(R, self._when_release_lost(lock, exc, result, args, kwargs))
            return result

        return wrapper

    def _wrap_async(self, func: Callable[P, Any]) -> Callable[P, Any]:
        @functools.wraps(func)
        async def wrapper(*args: P.args, **kwargs: P.kwargs) -> Any:
            return await self._call_async(func, args, kwargs)

        return wrapper

    async def _call_async(self, func: Callable[..., Any], args: Any, kwargs: Any) -> Any:
        """Hold the lock around ``func``, awaiting its result when it is awaitable."""
        try:
            name = self.resolve_name(func, args, kwargs)
        except BadLockName as exc:
            return self._bad_name(exc, args, kwargs)
        lock = self.lock_for(name, self.resolve_owner(args, kwargs))
        if not await lock.acquire_async(blocking=self.blocking):
            return self._when_locked(lock, await lock_pttl_async(lock), args, kwargs)
        try:
            result = func(*args, **kwargs)
            if inspect.isawaitable(result):
                result = await result
        except BaseException:
            await _release_after_error_async(lock)
            raise
        try:
            await lock.release_async()
        except LockLost as exc:
            return self._when_release_lost(lock, exc, result, args, kwargs)
        return result

    def _bad_name(self, exc: BadLockName, args: Any, kwargs: Any) -> Any:
        """A view answers a name its input cannot make with 400; anything else raises."""
        if not has_request(args, kwargs):
            raise exc
        from django.http import HttpResponseBadRequest

        logger.info("lock name refused: %s", exc)
        return HttpResponseBadRequest("Bad request: the lock name cannot be built.\n")

    def _when_release_lost(
        self, lock: BaseLock, exc: LockLost, result: Any, args: Any, kwargs: Any
    ) -> Any:
        """The function ran and returned ``result``, but the hold had ended before release."""
        action = self.on_release_lost
        if action is None:
            action = "response" if has_request(args, kwargs) else "raise"
        logger.warning("%s; the decorated call had completed", exc)
        if callable(action):
            return action(lock, result, *args, **kwargs)
        if action == "ignore":
            return result
        if action == "response":
            return lost_response(lock.name, result, request_of(args, kwargs))
        raise exc

    def _when_locked(self, lock: BaseLock, pttl: int, args: Any, kwargs: Any) -> Any:
        action = self.on_locked
        if action is None:
            action = "response" if has_request(args, kwargs) else "raise"
        if callable(action):
            return action(lock, *args, **kwargs)
        if action == "skip":
            return None
        if action == "response":
            return locked_response(lock.name, pttl, request_of(args, kwargs))
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


_locks: LockHandler | None = None


def _import_locks() -> LockHandler:
    """The ``locks`` handler, imported on first use (an import statement per decorated call
    cost a tenth of the decorator's own work)."""
    global _locks
    from ..handlers import locks

    _locks = locks
    return locks


def _async_view_dispatch(func: Callable[..., Any], args: Any) -> bool:
    """True when ``func(*args)`` is ``dispatch()`` of an async class-based view.

    The view is the call's first argument (the decorator on the class or on the
    method), or the object ``func`` is bound to (Django's ``method_decorator``
    passes a bound method).
    """
    if getattr(func, "__name__", "") != "dispatch":
        return False
    bound = getattr(func, "__self__", None) or getattr(
        getattr(func, "func", None), "__self__", None
    )
    for candidate in (*args[:1], bound):
        if candidate is not None and getattr(type(candidate), "view_is_async", None) is True:
            return True
    return False


def _release_after_error(lock: BaseLock) -> None:
    """Release after the function raised; a lost hold must not hide the function's error."""
    try:
        lock.release()
    except LockLost as exc:
        logger.warning("%s (the decorated call raised)", exc)


async def _release_after_error_async(lock: BaseLock) -> None:
    """The asyncio twin of :func:`_release_after_error`."""
    try:
        await lock.release_async()
    except LockLost as exc:
        logger.warning("%s (the decorated call raised)", exc)
