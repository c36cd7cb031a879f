"""What a decorated view answers when its lock is busy (423) or was lost (409)."""

from __future__ import annotations

import math
from typing import Any

from ..locking.base import BaseLock


def has_request(args: Any, kwargs: Any) -> bool:
    """True when an argument of the call is an ``HttpRequest`` (the call is a view)."""
    from django.http import HttpRequest

    return any(isinstance(value, HttpRequest) for value in (*args, *kwargs.values()))


def locked_response(name: str, pttl_ms: int) -> Any:
    """An HTTP 423 (Locked) response whose ``Retry-After`` is the holder's remaining TTL."""
    from django.http import HttpResponse

    response = HttpResponse(f"Locked: {name} is busy, retry later.\n", status=423)
    response["Retry-After"] = str(max(1, math.ceil(pttl_ms / 1000)))
    return response


def lost_response(name: str, result: Any) -> Any:
    """An HTTP 409 (Conflict): the view ran, but its lock had ended before the release.

    The view's own status is kept in ``X-Lock-Lost-Status`` so the client (and the
    logs) can tell that the work itself completed.
    """
    from django.http import HttpResponse

    response = HttpResponse(
        f"Conflict: the lock {name} ended before the request finished; its work completed "
        f"but may have overlapped another holder's.\n",
        status=409,
    )
    status = getattr(result, "status_code", None)
    if status is not None:
        response["X-Lock-Lost-Status"] = str(status)
    return response


def lock_pttl(lock: BaseLock) -> int:
    """The current holder's remaining TTL in ms (0 when unknown)."""
    holder_pttl = getattr(lock, "holder_pttl", None)
    if holder_pttl is not None:  # e.g. Redlock: decided by the masters, not one server
        return int(holder_pttl())
    key = getattr(lock, "_key", None)
    if key is None:
        return 0
    with lock.backend.errors():
        return max(0, int(lock.backend.client.pttl(key)))


async def lock_pttl_async(lock: BaseLock) -> int:
    """The asyncio twin of :func:`lock_pttl`."""
    holder_pttl = getattr(lock, "holder_pttl_async", None)
    if holder_pttl is not None:
        return int(await holder_pttl())
    key = getattr(lock, "_key", None)
    if key is None:
        return 0
    with lock.backend.errors():
        return max(0, int(await lock.backend.async_client().pttl(key)))
