"""The hot path of every lock call: one prepared ``EVALSHA`` per script a lock runs.

Each lock object keeps, per script it runs, a
:class:`~django_redislock.calls.script.Prepared` call whose head (``EVALSHA``,
the sha, the key count and the lock's keys) is packed once, so a call packs
only its few arguments (see :mod:`django_redislock.calls.script`, which also
handles ``NOSCRIPT``, and :mod:`django_redislock.calls.direct` for the clients that may
skip redis-py's ``execute_command``).
"""

from __future__ import annotations

from typing import Any

from ..calls.node import Node
from ..calls.script import Prepared, script


class ScriptCalls:
    """The script calls of one lock object: a prepared call per script."""

    __slots__ = ("_entries",)

    def __init__(self) -> None:
        self._entries: dict[str, Prepared] = {}

    def run(self, backend: Node, name: str, keys: list[str], args: list[Any]) -> Any:
        """Run script ``name`` with ``keys`` and ``args`` on ``backend``'s blocking client."""
        client = backend.client
        entry = self._entries.get(name)
        if entry is None or entry.client is not client or entry.keys != keys:
            direct = bool(backend.options.get("DIRECT_SENDER", True))
            entry = self._entries[name] = script(name).prepare(client, keys, direct)
        return entry(args)
