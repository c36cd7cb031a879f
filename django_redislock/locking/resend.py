"""How long a lock request can be resent, against how long the bucket remembers it.

A lock script recognises a resend of a request it already applied by the bucket's request
memory (scripts/fragments/requests.lua). The memory keeps each entry for
:data:`REQUEST_MEMORY_SECONDS`, however many requests the bucket sees; a resend later than that
would be applied again (a reentrant step twice, a take-back forgotten). redis-py resends a
command after a timeout or a dropped connection, so the longest resend window is what its
retry settings allow: the system check ``redislock.E012`` keeps that inside the memory.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: Seconds the bucket's request memory keeps an entry (REQUEST_SLOTS x 10 s in requests.lua).
REQUEST_MEMORY_SECONDS = 120.0
#: What a resend may add besides the client's own timeouts and pauses (scheduling, a GC pause).
RESEND_MARGIN_SECONDS = 10.0


def _retry_of(options: Mapping[str, Any]) -> Any:
    """The client's Retry: the one in CLIENT_KWARGS, else redis-py's default (no I/O)."""
    retry = options.get("CLIENT_KWARGS", {}).get("retry")
    if retry is not None:
        return retry
    import redis

    return redis.Redis().get_retry()  # builds a pool, opens no connection


def resend_window(options: Mapping[str, Any]) -> tuple[float, int]:
    """The longest time between a request's first send and its last resend, and the retries.

    Each of the ``retries + 1`` sends may wait ``SOCKET_TIMEOUT`` for its reply; before each
    resend the client may reconnect (``SOCKET_CONNECT_TIMEOUT``) and pause (the backoff, at
    most its cap).
    """
    retry = _retry_of(options)
    retries = int(getattr(retry, "_retries", 0) or 0)
    if retries < 0:  # redis-py: -1 retries for ever
        return float("inf"), retries
    backoff = getattr(retry, "_backoff", None)
    cap = float(getattr(backoff, "_cap", getattr(backoff, "_backoff", 0.0)) or 0.0)
    tries = retries + 1
    timeout = float(options["SOCKET_TIMEOUT"])
    connect = float(options.get("SOCKET_CONNECT_TIMEOUT", timeout))
    return tries * timeout + retries * (connect + cap) + RESEND_MARGIN_SECONDS, retries
