"""The hot path of every lock call: one prepared ``EVALSHA`` per script and keys, per client.

A :class:`~django_redislock.calls.script.Prepared` call packs its head (``EVALSHA``,
the sha, the key count and the lock's keys) once, so a call packs only its few
arguments (see :mod:`django_redislock.calls.script`, which also handles
``NOSCRIPT``, and :mod:`django_redislock.calls.direct` for the clients that may
skip redis-py's ``execute_command``).

The prepared calls belong to the client, not to the lock object: the README's
``with locks["default"].lock(name, ttl=10):`` builds a new object per call, and
rebuilding the senders and packing the heads each time cost about a quarter of
a cycle. :class:`ClientCalls` keeps them per backend and client (so per alias and
process: a settings change brings a new backend, a fork a new client, and either
a new cache), keyed by script and keys, up to ``MAX_PREPARED`` of them; whether
the client may use the direct sender is decided once per client too.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

from ..calls.direct import DirectSender, direct_pool
from ..calls.node import Node
from ..calls.script import Prepared, script
from ..connections import Client

#: Most prepared calls one client keeps (about 1 KB each); the oldest goes first.
MAX_PREPARED = 2048


class ClientCalls:
    """The prepared lock calls of one blocking client."""

    __slots__ = ("_grow", "calls", "client", "pool")

    def __init__(self, client: Client) -> None:
        self.client = client
        #: the pool a direct sender may use, decided once for this client (None: the wrapper)
        self.pool = direct_pool(client)
        self.calls: dict[tuple[Any, ...], Prepared] = {}
        self._grow = threading.Lock()

    def get(
        self, client: Client, name: str, keys: list[str], direct: bool, extra_keys: int = 0
    ) -> Prepared:
        """The prepared call of script ``name`` with ``keys`` (built on first use).

        ``extra_keys``: each call's arguments start with that many more keys (see
        :meth:`~django_redislock.calls.script.Script.prepare`).
        """
        cache_key = (name, direct, extra_keys, *keys)
        entry = self.calls.get(cache_key)
        if entry is None:
            # the pool decided once above, not per call built (redis-py's metrics check)
            entry = script(name).prepare(client, keys, direct=False, extra_keys=extra_keys)
            if direct and self.pool is not None:
                entry.sender = DirectSender(self.pool, entry.head)
            with self._grow:  # eviction iterates the dict: no other thread may add meanwhile
                if len(self.calls) >= MAX_PREPARED:
                    del self.calls[next(iter(self.calls))]
                self.calls[cache_key] = entry
        return entry


# keyed by the backend, which outlives its clients and owns them anyway (a cache keyed by
# the client would keep it alive: every prepared call refers to its client)
_backends: weakref.WeakKeyDictionary[Any, ClientCalls] = weakref.WeakKeyDictionary()


def client_calls(backend: Node, client: Client) -> ClientCalls:
    """The :class:`ClientCalls` of ``backend``'s current blocking ``client``."""
    found = _backends.get(backend)
    if found is None or found.client is not client:
        found = _backends[backend] = ClientCalls(client)
    return found


class ScriptCalls:
    """The script calls of one lock object: the client's prepared call per script."""

    __slots__ = ("_entries",)

    def __init__(self) -> None:
        self._entries: dict[str, Prepared] = {}

    def run(self, backend: Node, name: str, keys: list[str], args: list[Any]) -> Any:
        """Run script ``name`` with ``keys`` and ``args`` on ``backend``'s blocking client."""
        client = backend.client
        entry = self._entries.get(name)
        # one entry per script, replaced whole: threads that share this object (lock
        # objects of one name share it) never pair one call's keys with another's head
        if entry is None or entry.client is not client or entry.keys != keys:
            direct = bool(backend.options.get("DIRECT_SENDER", True))
            calls = client_calls(backend, client)
            entry = self._entries[name] = calls.get(client, name, keys, direct)
        return entry(args)
