"""redis-py's internal races that stand for a dropped connection, told apart from bugs.

A connection closed under a send, as redis-py's asyncio client sometimes reports it, and a
Cluster client's slot-map reload that another thread's reload raced.

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
A Cluster client reloads its slot map after a connection error, inside its own
``execute_command``. Two threads of one process that reload at the same moment can break
each other's reload (redis-py's node manager is shared): a ``RuntimeError`` (a dict that
changed size during iteration) or an ``IndexError`` (no primary known for a moment) comes
out of the call. That is a call on a dropped connection whose outcome is unknown, as the
connection error that started the reload is: :func:`cluster_reload_race` tells it apart by
the frames it was raised through (redis-py's cluster code).

:func:`as_connection_error` turns either into the ``redis.ConnectionError`` it stands for.
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


#: The modules of a Cluster client's call and slot-map reload.
CLUSTER_INTERNALS = ("redis.cluster", "redis.asyncio.cluster")


def cluster_reload_race(exc: BaseException) -> bool:
    """True for a ``RuntimeError`` or ``IndexError`` raised inside a Cluster client's call
    (a frame of its traceback is redis-py's cluster code). Those two types exactly: a
    subclass (``NotImplementedError``, ``RecursionError``) says something else."""
    if type(exc) not in (RuntimeError, IndexError):
        return False
    tb = exc.__traceback__
    while tb is not None:
        module = tb.tb_frame.f_globals.get("__name__", "")
        if isinstance(module, str) and module.startswith(CLUSTER_INTERNALS):
            return True
        tb = tb.tb_next
    return False


def internal_race(exc: BaseException) -> bool:
    """True for either race of this module: a dropped connection in redis-py's words."""
    return closed_under_send(exc) or cluster_reload_race(exc)


def as_connection_error(exc: BaseException) -> ClosedUnderSend:
    """The connection error ``exc`` (an :func:`internal_race` error) stands for."""
    kind = type(exc).__name__
    error = ClosedUnderSend(f"the connection was closed under the call ({kind}: {exc})")
    error.__cause__ = exc
    return error
