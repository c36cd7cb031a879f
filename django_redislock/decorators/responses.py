"""What a decorated view answers when its lock is busy (423) or was lost (409)."""

from __future__ import annotations

import logging
import math
from typing import Any

from ..locking.base import BaseLock

logger = logging.getLogger("django_redislock.decorators")


def request_of(args: Any, kwargs: Any) -> Any:
    """The ``HttpRequest`` among the call's arguments, or None (the call is not a view)."""
    from django.http import HttpRequest

    for value in (*args, *kwargs.values()):
        if isinstance(value, HttpRequest):
            return value
    return None


def has_request(args: Any, kwargs: Any) -> bool:
    """True when an argument of the call is an ``HttpRequest`` (the call is a view)."""
    return request_of(args, kwargs) is not None


def wants_json(request: Any) -> bool:
    """True when the client asked for JSON (an API client), not a page or plain text."""
    return request is not None and "json" in request.headers.get("Accept", "")


def error_response(request: Any, status: int, error: str, text: str, **fields: Any) -> Any:
    """``text`` as ``text/plain``, or ``{"error": error, "detail": text, **fields}`` as JSON.

    Never HTML (the answer is read by programs and shown verbatim) and never the lock name:
    a name is built from URL values and server-side templates that the client need not see.
    """
    from django.http import HttpResponse, JsonResponse

    if wants_json(request):
        return JsonResponse({"error": error, "detail": text, **fields}, status=status)
    return HttpResponse(f"{text}\n", status=status, content_type="text/plain; charset=utf-8")


def locked_response(name: str, pttl_ms: int, request: Any = None) -> Any:
    """An HTTP 423 (Locked) response whose ``Retry-After`` is the holder's remaining TTL.

    ``name`` is logged, not sent; ``request`` chooses JSON (its ``Accept`` names JSON) or text.
    """
    seconds = max(1, math.ceil(pttl_ms / 1000))
    logger.debug("lock %s is busy: 423, retry after %d s", name, seconds)
    response = error_response(
        request, 423, "locked", "Locked: busy, retry later.", retry_after=seconds
    )
    response["Retry-After"] = str(seconds)
    return response


def lost_response(name: str, result: Any, request: Any = None) -> Any:
    """An HTTP 409 (Conflict): the view ran, but its lock had ended before the release.

    The view's own status is kept in ``X-Lock-Lost-Status`` so the client (and the
    logs) can tell that the work itself completed. ``name`` is logged, not sent.
    """
    status = getattr(result, "status_code", None)
    logger.debug("lock %s ended before the release: 409 (the view answered %s)", name, status)
    response = error_response(
        request,
        409,
        "lock_lost",
        "Conflict: the lock ended before the request finished; its work completed but may "
        "have overlapped another request's.",
        view_status=status,
    )
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
