"""A direct request path for the one hot call of the queue: the enqueue script.

redis-py's ``execute_command`` spends more client time on one ``EVALSHA`` than the
server spends running the enqueue script: it re-packs the constant head of the
command (sha, key count, seven keys) on every call and wraps each command in
observability hooks, a retry closure and per-command dispatch checks. On the
2-core benchmark machine that was 15-25 µs of a ~100 µs enqueue. A
:class:`DirectSender` packs the head once per client and sends the request on
a pooled connection itself, keeping what matters from ``execute_command``: the
connection's own retry policy (a connection error disconnects and retries, as
redis-py does), its health check, error replies raised as redis-py exceptions
(``NoScriptError`` included), a connection interrupted between request and reply
(``KeyboardInterrupt``, a timeout) dropped rather than reused, and the connection
always going back to the pool.

It is used only where that is all a command needs: the clients that
:func:`django_redislock.wire.direct_pool` allows (the rule the lock scripts'
fast path follows too).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import redis

from ..wire import direct_pool


def direct_sender(client: Any, head: Sequence[Any]) -> DirectSender | None:
    """A :class:`DirectSender` of ``head`` for ``client``, or None where it must not be used."""
    pool = direct_pool(client)
    if pool is None:
        return None
    return DirectSender(pool, head)


class DirectSender:
    """Sends a command whose start (``head``) is packed once, then per-call arguments."""

    def __init__(self, pool: Any, head: Sequence[Any]) -> None:
        self.pool = pool
        encoder = pool.get_encoder()
        self.encode: Callable[[Any], bytes] = encoder.encode
        self.text = (encoder.encoding, encoder.encoding_errors)
        self.count = len(head)
        self.head = self.bulk(head)

    def bulk(self, values: Sequence[Any]) -> bytes:
        """RESP bulk strings of ``values``, encoded as redis-py's ``Encoder`` would.

        The types an enqueue sends (bytes, str, int) are converted inline, which
        is several times cheaper than a call to ``Encoder.encode`` per argument.
        """
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

    def call(self, args: Sequence[Any]) -> Any:
        """Send the head followed by ``args``; the parsed reply (error replies are raised)."""
        request = b"*%d\r\n%b%b" % (self.count + len(args), self.head, self.bulk(args))
        pool = self.pool
        conn = pool.get_connection()
        try:
            return conn.retry.call_with_retry(
                lambda: self._round_trip(conn, request), lambda error: conn.disconnect()
            )
        except redis.ResponseError:
            raise  # an error reply: the connection is fine
        except BaseException:
            conn.disconnect()  # e.g. KeyboardInterrupt between send and read: a reply may be due
            raise
        finally:
            pool.release(conn)

    @staticmethod
    def _round_trip(conn: Any, request: bytes) -> Any:
        conn.send_packed_command([request])
        return conn.read_response()
