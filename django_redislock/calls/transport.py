"""A connection closed under a send, as redis-py's asyncio client sometimes reports it.

redis-py's asyncio connection checks that it is open, then writes; between the two (an
``await``: on Python 3.11 ``asyncio.wait_for`` runs the write on a later turn of the loop)
another coroutine's ``disconnect()`` can close it. A Cluster client does that to every
connection of its nodes when it reloads its slot map, which is what a loaded machine's
timeouts bring about. The write then fails inside redis-py or inside the asyncio transport
under it with an ``AttributeError`` (``'NoneType' object has no attribute 'writelines'``)
or a ``TypeError`` (``'NoneType' object is not callable``), neither of which redis-py
counts as a connection error (redis-py issues #3546 and #4287): its retries do not apply,
and a caller would take a dropped connection for a bug.

:func:`closed_under_send` tells that case apart by where the error was raised (the last
frame of its traceback is redis-py's connection or parser code, or asyncio's streams and
transports), so an ``AttributeError`` of anyone else's code is never mistaken for it.
:func:`as_connection_error` turns it into the ``redis.ConnectionError`` it stands for.
"""

from __future__ import annotations

import redis

#: Where a closed connection's write or read fails: redis-py's asyncio connection and its
#: reply parsers, and the asyncio stream and transport code they call.
INTERNALS = (
    "redis.asyncio.connection",
    "redis._parsers.",
    "asyncio.streams",
    "asyncio.selector_events",
    "asyncio.proactor_events",
    "asyncio.sslproto",
    "asyncio.transports",
)


class ClosedUnderSend(redis.ConnectionError):
    """A call's connection was closed under it (see :func:`closed_under_send`)."""


def closed_under_send(exc: BaseException) -> bool:
    """True for an ``AttributeError`` or ``TypeError`` raised by a closed connection's
    internals (the last frame of its traceback is in :data:`INTERNALS`)."""
    if not isinstance(exc, (AttributeError, TypeError)):
        return False
    tb = exc.__traceback__
    if tb is None:
        return False
    while tb.tb_next is not None:
        tb = tb.tb_next
    module = tb.tb_frame.f_globals.get("__name__", "")
    return isinstance(module, str) and module.startswith(INTERNALS)


def as_connection_error(exc: BaseException) -> ClosedUnderSend:
    """The connection error ``exc`` (a :func:`closed_under_send` error) stands for."""
    kind = type(exc).__name__
    error = ClosedUnderSend(f"the connection was closed under the call ({kind}: {exc})")
    error.__cause__ = exc
    return error
