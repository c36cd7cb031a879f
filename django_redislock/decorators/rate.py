"""``@rate_limited``: at most N calls per period of a view or function, across every process.

::

    @rate_limited("20/s")                                   # one limit for the function
    def charge(order): ...

    @rate_limited("5/m", key=lambda request, **kw: request.user.pk)
    def export(request): ...                                # one limit per user; 429 when over

A view (a call with an ``HttpRequest`` among its arguments) that is over its limit is not
called: the answer is HTTP 429 (Too Many Requests) with ``Retry-After`` in whole seconds,
as text or JSON like the lock decorator's answers. Any other function waits for its slot
(``timeout=None``) or, with a ``timeout``, raises :class:`~django_redislock.exceptions.RateLimited`
when its slot is further away. ``async def`` functions and views wait with ``asyncio``.
The limit is :class:`~django_redislock.locking.limiter.RateLimiter` (GCRA on Redis), named
after the function unless ``name=`` says otherwise.
"""

from __future__ import annotations

import functools
import inspect
import logging
import math
from collections.abc import Callable
from typing import Any, TypeVar

from ..exceptions import InvalidArgument, RateLimited
from ..locking.limiter import Admission, RateLimiter
from ..validation import check_seconds, parse_rate
from .responses import error_response, request_of

logger = logging.getLogger("django_redislock.decorators")

F = TypeVar("F", bound=Callable[..., Any])


def rate_limited(
    rate: str,
    *,
    key: Callable[..., Any] | None = None,
    name: str | None = None,
    using: str = "default",
    burst: int | None = None,
    timeout: float | None = None,
) -> Callable[[F], F]:
    """Limit calls of the decorated function to ``rate`` (see the module docs).

    ``key(*args, **kwargs)`` (the call's arguments) names whose limit a call counts
    against; ``using`` is the ``REDISLOCK_LOCKS`` alias. Bad arguments raise
    :class:`InvalidArgument` when the decorator is applied.
    """
    parse_rate(rate, "rate")
    if key is not None and not callable(key):
        raise InvalidArgument(f"key must be a callable of the call's arguments, got {key!r}")
    if timeout is not None:
        check_seconds(timeout, "timeout", allow_zero=True)

    def decorate(func: F) -> F:
        limit_name = name or f"{func.__module__}.{func.__qualname__}"
        limiter: list[RateLimiter] = []

        def limiter_of() -> RateLimiter:
            if not limiter:  # built on first call: settings are read then, not at import
                from ..handlers import locks

                limiter.append(locks[using].rate_limiter(limit_name, rate, burst=burst))
            return limiter[0]

        def key_of(args: Any, kwargs: Any) -> Any:
            return None if key is None else key(*args, **kwargs)

        if inspect.iscoroutinefunction(func):

            @functools.wraps(func)
            async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                limit, which = limiter_of(), key_of(args, kwargs)
                request = request_of(args, kwargs)
                if request is not None:
                    answer = await limit.try_acquire_async(key=which)
                    if not answer.admitted:
                        return too_many(limit, answer, request)
                elif not await limit.acquire_async(key=which, timeout=timeout):
                    raise RateLimited(f"rate limit {limit.name!r} ({limit.rate.text}) is full")
                return await func(*args, **kwargs)

            return async_wrapper  # type: ignore[return-value]

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            limit, which = limiter_of(), key_of(args, kwargs)
            request = request_of(args, kwargs)
            if request is not None:
                answer = limit.try_acquire(key=which)
                if not answer.admitted:
                    return too_many(limit, answer, request)
            elif not limit.acquire(key=which, timeout=timeout):
                raise RateLimited(f"rate limit {limit.name!r} ({limit.rate.text}) is full")
            return func(*args, **kwargs)

        return wrapper  # type: ignore[return-value]

    return decorate


def too_many(limit: RateLimiter, answer: Admission, request: Any) -> Any:
    """An HTTP 429 (Too Many Requests) with ``Retry-After`` in whole seconds (at least 1)."""
    seconds = max(1, math.ceil(answer.retry_after))
    logger.debug("rate limit %s is full: 429, retry after %d s", limit.name, seconds)
    response = error_response(
        request, 429, "rate_limited", "Too many requests, retry later.", retry_after=seconds
    )
    response["Retry-After"] = str(seconds)
    return response
