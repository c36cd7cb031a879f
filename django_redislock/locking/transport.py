"""The hot path of every lock call: one ``EVALSHA`` on one pooled connection.

Each lock object keeps, per script it runs, a :class:`~django_redislock.wire.DirectSender`
whose head (``EVALSHA``, the sha, the key count and the lock's keys) is packed
once, so a call packs only its few arguments and skips redis-py's
``execute_command`` wrapper (see :mod:`django_redislock.wire` for what that
costs and for which clients it is allowed).

Whatever that path does not handle goes through redis-py as before, so no
behaviour is lost:

* ``NOSCRIPT`` (a restarted or flushed server): the script is loaded and run;
* every client :func:`django_redislock.wire.direct_pool` leaves on the wrapper
  (Cluster, Sentinel, fakeredis, a custom ``CLIENT_CLASS``, a single-connection
  client, client-side caching, redis-py's OpenTelemetry metrics).
"""

from __future__ import annotations

from typing import Any

import redis

from ..calls.node import Node
from ..wire import DirectSender, direct_sender


class ScriptCalls:
    """The script calls of one lock object: a registered script and a sender per script."""

    __slots__ = ("_entries",)

    def __init__(self) -> None:
        self._entries: dict[str, tuple[Any, list[str], Any, DirectSender | None]] = {}

    def run(self, backend: Node, name: str, keys: list[str], args: list[Any]) -> Any:
        """Run script ``name`` with ``keys`` and ``args`` on ``backend``'s blocking client."""
        client = backend.client
        entry = self._entries.get(name)
        if entry is None or entry[0] is not client or entry[1] != keys:
            script = backend.script(name, client)
            head = ("EVALSHA", script.sha, len(keys), *keys)
            entry = (client, keys, script, direct_sender(client, head))
            self._entries[name] = entry
        return evalsha(entry[2], keys, args, entry[3])


def evalsha(script: Any, keys: list[str], args: list[Any], sender: DirectSender | None) -> Any:
    """Run the registered ``script`` (a redis-py ``Script``) through ``sender`` if there is one."""
    try:
        if sender is not None:
            return sender.call(args)
        client = script.registered_client
        return client.execute_command("EVALSHA", script.sha, len(keys), *keys, *args)
    except redis.exceptions.NoScriptError:
        return script(keys=keys, args=args)  # loads the script, then runs it
