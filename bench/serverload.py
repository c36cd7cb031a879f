"""A redis-benchmark-style load from Python: many connections, each keeping requests in flight.

``redis-benchmark`` measures what a server does per second when the client is not the
limit; this module does the same for the scripts of this app without a tool from outside
the project. Every request is packed before the clock starts (distinct buyers, distinct
request keys: a real crowd, not one request replayed), then ``clients`` connections each
keep ``pipeline`` requests in flight from one thread (a ``selectors`` loop): a reply
read sends the next request of that connection. Replies are counted, and kept when asked
(to check what the server answered).
"""

from __future__ import annotations

import selectors
import socket
import time
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlparse

#: redis-benchmark's default number of connections.
CLIENTS = 50
#: Requests each connection keeps in flight (redis-benchmark's ``-P``); a Python client
#: answering every reply one by one would be the limit, not the server.
PIPELINE = 1


def pack(*args: Any) -> bytes:
    """One command in RESP, as any client would send it."""
    out = [b"*%d\r\n" % len(args)]
    for arg in args:
        data = arg if isinstance(arg, bytes) else str(arg).encode()
        out.append(b"$%d\r\n%b\r\n" % (len(data), data))
    return b"".join(out)


def _reader() -> Any:
    try:
        import hiredis

        return hiredis.Reader()
    except ImportError:  # redis-py's own parser, through a tiny adapter
        return _PythonReader()


class _PythonReader:
    """Counts replies without hiredis: integers, simple and bulk strings without a line break
    in them, errors and flat arrays of integers."""

    def __init__(self) -> None:
        self.buffer = b""

    def feed(self, data: bytes) -> None:
        self.buffer += data

    def gets(self) -> Any:
        lines = self.buffer.split(b"\r\n")
        if len(lines) < 2:
            return False
        head = lines[0]
        if head[:1] == b"*":
            count = int(head[1:])
            if len(lines) < count + 2:
                return False
            items = [self._scalar(line) for line in lines[1 : count + 1]]
            self.buffer = b"\r\n".join(lines[count + 1 :])
            return items
        if head[:1] == b"$":  # a bulk string (a probe's GET): its data is the next line
            if head == b"$-1":
                self.buffer = b"\r\n".join(lines[1:])
                return None
            if len(lines) < 3:
                return False
            self.buffer = b"\r\n".join(lines[2:])
            return lines[1]
        self.buffer = b"\r\n".join(lines[1:])
        return self._scalar(head)

    @staticmethod
    def _scalar(line: bytes) -> Any:
        if line[:1] == b":":
            return int(line[1:])
        return line[1:]


def run(
    url: str,
    requests: Sequence[bytes],
    clients: int = CLIENTS,
    pipeline: int = PIPELINE,
    keep: bool = False,
) -> tuple[float, list[Any]]:
    """Send every request of ``requests`` over ``clients`` connections; (requests/s, replies).

    The requests are dealt out to the connections in turn; each connection writes its
    first ``pipeline`` requests, then one more per reply until its share is sent.
    """
    where = urlparse(url)
    shares = [list(requests[i::clients]) for i in range(clients)]
    selector = selectors.DefaultSelector()
    replies: list[Any] = []
    socks = []
    for share in shares:
        if not share:
            continue
        sock = socket.create_connection((where.hostname or "127.0.0.1", where.port or 6379))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        socks.append(sock)
        state = {"todo": share, "next": 0, "open": 0, "reader": _reader()}
        selector.register(sock, selectors.EVENT_READ, state)
    pending = len(requests)
    start = time.perf_counter()
    for key in list(selector.get_map().values()):
        state = key.data
        first = state["todo"][:pipeline]
        state["next"] = state["open"] = len(first)
        key.fileobj.sendall(b"".join(first))  # type: ignore[union-attr]
    while pending:
        for key, _ in selector.select(timeout=60):
            state = key.data
            conn: Any = key.fileobj
            data = conn.recv(1 << 16)
            if not data:
                raise RuntimeError("the server closed a connection")
            reader = state["reader"]
            reader.feed(data)
            done = 0
            while (reply := reader.gets()) is not False:
                done += 1
                if keep:
                    replies.append(reply)
            if not done:
                continue
            pending -= done
            state["open"] -= done
            todo, at = state["todo"], state["next"]
            more = todo[at : at + done]
            if more:
                state["next"] = at + len(more)
                state["open"] += len(more)
                conn.sendall(b"".join(more))
    elapsed = time.perf_counter() - start
    for sock in socks:
        selector.unregister(sock)
        sock.close()
    return len(requests) / elapsed, replies
