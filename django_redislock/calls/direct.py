"""The direct request path of the hot calls: lock scripts and the enqueue script.

redis-py's ``execute_command`` spends more client time on one ``EVALSHA`` than
the server spends running a lock or enqueue script: it re-packs the constant
head of the command (sha, key count, keys) on every call and wraps each command
in observability hooks, a retry closure and per-command dispatch checks. A
:class:`DirectSender` packs the head once and sends the request on a connection
of the client's own pool, keeping what matters from ``execute_command``: the
connection's retry policy (a connection error disconnects and retries, as
redis-py does), its health check, error replies raised as redis-py exceptions
(``NOSCRIPT`` included), a connection interrupted between request and
reply (``KeyboardInterrupt``, a timeout) dropped rather than reused, a server's
maintenance notice honoured, and the connection always going back to the pool.

That is only safe where the wrapper adds nothing a command needs, which
:func:`direct_pool` decides: a plain ``redis.Redis`` (Sentinel, Cluster,
fakeredis and custom client classes keep ``execute_command``), a standard pool,
redis-py >= 5.3, no client-side cache, no single-connection client, and
redis-py's OpenTelemetry metrics off (with them on every command goes through
the wrapper, so none is missing from the metrics).
"""

from __future__ import annotations

import codecs
import contextlib
import select
import threading
from collections.abc import Callable, Sequence
from typing import Any

import redis

from .. import connections
from ..connections import Client
from ..wire import redis_py_version
from .values import Arg, Reply


def metrics_enabled() -> bool:
    """True when redis-py's OpenTelemetry metrics are on (they time commands in the wrapper)."""
    try:
        from redis.observability.providers import get_observability_instance
    except ImportError:  # redis-py without observability hooks
        return False
    try:
        return get_observability_instance().get_provider_manager() is not None
    except Exception:  # an unknown redis-py layout: stay on execute_command
        return True


def direct_pool(client: Client) -> redis.ConnectionPool | None:
    """The pool whose connections a hot call may use directly, or None (use the wrapper)."""
    pool = getattr(client, "connection_pool", None)
    if (
        type(client) is not redis.Redis
        or type(pool) not in (redis.ConnectionPool, redis.BlockingConnectionPool)
        or getattr(client, "connection", None) is not None
        or getattr(pool, "cache", None) is not None
        or redis_py_version() < (5, 3)
        or metrics_enabled()
    ):
        return None
    return pool


def direct_sender(client: Client, head: Sequence[Arg]) -> DirectSender | None:
    """A :class:`DirectSender` of ``head`` for ``client``, or None where it must not be used."""
    pool = direct_pool(client)
    if pool is None:
        return None
    return DirectSender(pool, head)


class DirectSender:
    """Sends a command whose start (``head``) is packed once, then per-call arguments."""

    def __init__(self, pool: redis.ConnectionPool, head: Sequence[Arg]) -> None:
        self.pool = pool
        encoder = pool.get_encoder()
        self.encode: Callable[[Any], bytes] = encoder.encode
        self.text = (encoder.encoding, encoder.encoding_errors)
        #: ``str.encode()`` with no arguments is what the encoder does (its default setting);
        #: spreading ``self.text`` into every call cost as much as the rest of the packing
        self.utf8 = codecs.lookup(encoder.encoding).name == "utf-8" and (
            encoder.encoding_errors == "strict"
        )
        self.count = len(head)
        self.head = self.bulk(head)

    def bulk(self, values: Sequence[Any]) -> bytes:
        """RESP bulk strings of ``values``, encoded as redis-py's ``Encoder`` would.

        The types the hot calls send (str, int, bytes) are converted inline, which
        is several times cheaper than a call to ``Encoder.encode`` per argument.
        """
        if not self.utf8:
            return self._bulk_encoded(values)
        out = b""
        for value in values:  # a lock call has five or six: appending beats a join here
            kind = type(value)
            if kind is str:
                data = value.encode()
            elif kind is int:
                data = b"%d" % value
            elif kind is bytes:
                data = value
            else:
                data = self.encode(value)
            out += b"$%d\r\n%b\r\n" % (len(data), data)
        return out

    def _bulk_encoded(self, values: Sequence[Any]) -> bytes:
        """:meth:`bulk` for an encoding other than strict UTF-8."""
        out = []
        for value in values:
            kind = type(value)
            if kind is bytes:
                data = value
            elif kind is str:
                data = value.encode(*self.text)
            elif kind is int:
                data = b"%d" % value
            else:
                data = self.encode(value)
            out.append(b"$%d\r\n%b\r\n" % (len(data), data))
        return b"".join(out)

    def call(self, args: Sequence[Arg]) -> Reply:
        """Send the head followed by ``args``; the parsed reply (error replies are raised)."""
        return self.send(b"*%d\r\n%b%b" % (self.count + len(args), self.head, self.bulk(args)))

    def prefix(self, count: int) -> bytes:
        """The start of a request of the head and ``count`` more arguments (for a caller
        that packs those arguments itself, then sends the whole with :meth:`send`)."""
        return b"*%d\r\n%b" % (self.count + count, self.head)

    def send(self, request: bytes) -> Reply:
        """Send one whole packed request; the parsed reply (error replies are raised)."""
        kept = _kept_connection(self.pool)
        if kept is not None:
            kept.busy = True
            try:
                kept.check()
                return _send(kept.conn, request)
            finally:
                kept.busy = False
        pool = self.pool
        conn = pool.get_connection()
        try:
            return _send(conn, request)
        finally:
            pool.release(conn)


def _round_trip(conn: Any, request: bytes) -> Any:
    conn.send_packed_command([request])
    reply = conn.read_response()
    reconnect = getattr(conn, "should_reconnect", None)
    if reconnect is not None and reconnect():  # a maintenance notice from the server
        conn.disconnect()
    return reply


def _send(conn: Any, request: bytes) -> Any:
    """One request on ``conn`` under the connection's retry policy, as redis-py sends one.

    The first try runs outside the policy: wrapping every call in
    ``Retry.call_with_retry`` (two closures, a backoff reset) cost more than the rest of
    the send's own Python. A first try that raises hands its error to the policy as the
    outcome of the policy's own first try, so what follows (which errors are retried, how
    often, the disconnects and pauses) is exactly redis-py's.
    """
    try:
        try:
            return _round_trip(conn, request)
        except Exception as exc:
            first = [exc]

            def again() -> Any:
                if first:
                    raise first.pop()  # the policy's first try is the one that just failed
                return _round_trip(conn, request)

            return conn.retry.call_with_retry(again, lambda error: conn.disconnect())
    except redis.ResponseError:
        raise  # an error reply: the connection is fine
    except BaseException:
        conn.disconnect()  # e.g. KeyboardInterrupt between send and read: a reply may be due
        raise


class _Kept:
    """A connection a thread keeps out of a pool for its hot calls; back when the thread ends."""

    __slots__ = ("busy", "conn", "generation", "polled", "poller", "pool")

    def __init__(self, pool: Any, conn: Any) -> None:
        self.pool = pool
        self.conn = conn
        self.generation = connections.fork_generation()
        self.busy = False
        self.poller = select.poll()
        #: the socket ``poller`` watches (a reconnect brings a new one)
        self.polled: Any = None

    def check(self) -> None:
        """Drop the socket if the server closed it or left unread data (as the pool does).

        A server restart or its idle ``timeout`` closes connections; the pool finds
        that when it hands one out, with three system calls. One ``poll`` does here:
        a closed socket or stray data is readable, and the send reconnects. The poll
        object is kept while the socket is the same one, not built per call.
        """
        sock = getattr(self.conn, "_sock", None)
        if sock is None:
            return
        if sock is not self.polled:
            self.poller = select.poll()
            self.poller.register(sock, select.POLLIN)
            self.polled = sock
        if self.poller.poll(0):
            self.conn.disconnect()

    def give_back(self) -> None:
        """Return the connection to its pool (not from a forked child: it was the parent's)."""
        conn, self.conn, self.polled = self.conn, None, None
        if conn is not None and self.generation == connections.fork_generation():
            # at interpreter shutdown, or after a pool reset, there is nothing to give back
            with contextlib.suppress(Exception):
                self.pool.release(conn)

    def __del__(self) -> None:  # the thread ended (its locals are cleared), or it was evicted
        self.give_back()


#: Most pools one thread keeps a connection of. A kept connection refers to its pool, so a
#: pool whose client was dropped (a settings change) lives on in a thread that kept one; the
#: oldest is given back when a thread uses more pools than this.
MAX_KEPT = 8


class _Threads(threading.local):
    def __init__(self) -> None:
        self.kept: dict[Any, _Kept] = {}


_threads = _Threads()


def _kept_connection(pool: Any) -> _Kept | None:
    """This thread's connection of ``pool`` for hot calls, or None to use the pool per call.

    ``get_connection`` locks the pool and checks every connection it hands out
    for unread data, which costs three system calls per command; a connection
    that only this thread uses, and that is dropped whenever a call on it fails,
    needs one (see :meth:`_Kept.check`). A thread keeps one only where that
    cannot starve others: a plain ``ConnectionPool`` (a ``BlockingConnectionPool``
    is a deliberate limit) with at most half of its ``max_connections`` in use.
    A call made while the thread's connection is busy (a signal handler that
    interrupts a call) and a forked child use the pool as before.
    """
    kept = _threads.kept.get(pool)
    if kept is not None:
        if kept.generation == connections._forks and not kept.busy:  # fork_generation()
            return kept
        if kept.busy:
            return None
        del _threads.kept[pool]  # the parent's, inherited through fork(): never used here
    if type(pool) is not redis.ConnectionPool:
        return None
    in_use = getattr(pool, "_in_use_connections", None)
    if in_use is None or len(in_use) * 2 >= int(getattr(pool, "max_connections", 0) or 0):
        return None
    held = _threads.kept
    if len(held) >= MAX_KEPT:
        oldest = next(iter(held))
        if held[oldest].busy:
            return None
        held.pop(oldest).give_back()
    kept = held[pool] = _Kept(pool, pool.get_connection())
    return kept
