"""A client-side fault: an asyncio connection closed under its send (redis-py's writer race).

redis-py's asyncio ``send_packed_command`` checks that its connection is open, then (with a
socket timeout, which this app always sets) hands the write to ``asyncio.wait_for``, which on
Python 3.11 runs it on a later turn of the loop. A ``disconnect()`` by another coroutine in
between (a Cluster client closing its nodes' connections to reload the slot map, under load)
leaves the connection's ``_writer`` None, and the write raises ``AttributeError: 'NoneType'
object has no attribute 'writelines'`` from redis-py's own code (redis-py issues #3546 and
#4287 describe the family: a closed transport leaks an ``AttributeError`` or ``TypeError``
instead of ``ConnectionError``).

:func:`closed_under_send` makes that happen on chosen sends, on any Python and any load: at
the start of the write it does what the other coroutine's ``disconnect()`` does, then lets
redis-py's write go on. Nothing of the command reaches the server.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any
from unittest import mock

from redis.asyncio.connection import AbstractConnection

from django_redislock.calls.script import script


def evalsha_of(name: str) -> Callable[[bytes], bool]:
    """A matcher of the packed ``EVALSHA`` requests of the app's script ``name``."""
    sha = script(name).sha.encode()
    return lambda data: b"EVALSHA" in data and sha in data


@contextlib.contextmanager
def closed_under_send(match: Callable[[bytes], bool], times: int = 1) -> Iterator[list[bytes]]:
    """Close the connection under the first ``times`` asyncio sends whose bytes ``match``.

    Yields the list of the requests it hit (a test checks that its fault happened).
    """
    hit: list[bytes] = []
    guard = threading.Lock()
    original = AbstractConnection._send_packed_command

    async def send(self: Any, command: Iterable[bytes]) -> None:
        chunks = list(command)
        data = b"".join(chunks)
        with guard:
            fire = len(hit) < times and match(data)
            if fire:
                hit.append(data)
        if fire:  # what a concurrent disconnect() leaves: parser reset, transport closed
            self._parser.on_disconnect()
            writer, self._reader, self._writer = self._writer, None, None
            if writer is not None:
                writer.close()
        await original(self, chunks)

    with mock.patch.object(AbstractConnection, "_send_packed_command", send):
        yield hit
