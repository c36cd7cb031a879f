"""Many script calls (and plain commands) in one pipeline, with ``NOSCRIPT`` handled once.

On a single server a pipeline is one round trip. On a Cluster, a batch of
script calls outside a transaction goes out as one plain pipeline per master
that owns a call's slot (redis-py's cluster pipeline would ask the server
``COMMAND GETKEYS`` for every ``EVALSHA``); a call whose slot moved meanwhile
(``MOVED``/``ASK``) is resent through the cluster client, which follows it.

A call answered ``NOSCRIPT`` did not run. What is resent after loading the
scripts depends on how the calls relate, which only the caller knows:

* ``resend="missing"`` (independent calls: index pages, renewals, summaries):
  exactly the calls answered ``NOSCRIPT``. Calls that ran are never sent twice,
  so a batch may hold calls that must not run twice.
* ``resend="rest"`` (calls that build on each other: an enqueue and its result
  mark, a grant and the ``WAIT`` for its replicas): every call from the first
  ``NOSCRIPT`` on, in order and in a pipeline of the same kind (a ``MULTI``
  stays a ``MULTI``). The caller states that the later calls are safe to run
  again (they check, or only read).
"""

from __future__ import annotations

from typing import Any, Literal

import redis

from ..connections import Client
from ..exceptions import InvalidArgument
from .script import Call, NoScriptError, script
from .values import Arg, Reply

#: A plain command in a batch: its name and arguments (``("WAIT", 1, 100)``).
Command = tuple[Any, ...]
Resend = Literal["missing", "rest"]


class Batch:
    """Calls to send together on one blocking client; :meth:`execute` sends them."""

    def __init__(self, client: Client, *, transaction: bool = False) -> None:
        self.client = client
        self.transaction = transaction
        #: per item: a script call (name, keys, args), or None for a plain command
        self.calls: list[Call | None] = []
        self.commands: list[Command] = []
        #: True once :meth:`execute` read the first pipeline's replies: every call in it
        #: ran or answered ``NOSCRIPT``. An exception raised after that (while loading
        #: the scripts or resending) means the calls that ran are not to be sent again.
        self.sent = False

    def __len__(self) -> int:
        return len(self.calls)

    def add(self, name: str, keys: list[str], args: list[Arg]) -> int:
        """Add a call of script ``name``; its position in :meth:`execute`'s results."""
        self.calls.append((name, keys, args))
        self.commands.append(script(name).args(keys, args))
        return len(self.calls) - 1

    def command(self, *args: Arg) -> int:
        """Add a plain command (not a script); its position in the results."""
        self.calls.append(None)
        self.commands.append(args)
        return len(self.calls) - 1

    def execute(self, resend: Resend = "missing") -> list[Reply]:
        """Send everything; one result per item, a failed item's result is its exception."""
        if resend not in ("missing", "rest"):
            raise InvalidArgument(f"resend must be 'missing' or 'rest', got {resend!r}")
        results = self._send(list(range(len(self.commands))))
        self.sent = True
        missing = [i for i, result in enumerate(results) if isinstance(result, NoScriptError)]
        if not missing:
            return results
        for name in {call[0] for call in (self.calls[i] for i in missing) if call is not None}:
            script(name).load(self.client)
        again = missing if resend == "missing" else list(range(missing[0], len(self.commands)))
        for position, result in zip(again, self._send(again), strict=True):
            results[position] = result
        return results

    def _send(self, positions: list[int]) -> list[Any]:
        if not positions:
            return []
        commands = [self.commands[p] for p in positions]
        cluster = isinstance(self.client, redis.RedisCluster)
        if cluster and not self.transaction and None not in (self.calls[p] for p in positions):
            return self._send_cluster(commands, [self.calls[p] for p in positions])
        return pipelined(self.client, commands, self.transaction)

    def _send_cluster(self, commands: list[Command], calls: list[Call | None]) -> list[Any]:
        """One plain pipeline per master, grouped by the slot of each call's first key."""
        client: Any = self.client  # redis-py's cluster routing API is untyped
        by_node: dict[str, list[int]] = {}
        nodes: dict[str, Any] = {}
        for position, call in enumerate(calls):
            assert call is not None  # only script calls take this path
            node = client.nodes_manager.get_node_from_slot(client.keyslot(call[1][0]))
            by_node.setdefault(node.name, []).append(position)
            nodes[node.name] = node
        results: list[Any] = [None] * len(commands)
        for name, positions in by_node.items():
            node_client = client.get_redis_connection(nodes[name])
            replies = pipelined(node_client, [commands[p] for p in positions], False)
            for position, reply in zip(positions, replies, strict=True):
                results[position] = reply
        for position, reply in enumerate(results):
            if isinstance(reply, redis.ResponseError) and str(reply).startswith(("MOVED", "ASK")):
                try:
                    results[position] = client.execute_command(*commands[position])
                except redis.ResponseError as exc:
                    results[position] = exc
        return results


def pipelined(client: Client, commands: list[Command], transaction: bool) -> list[Reply]:
    """Send ``commands`` in one pipeline; one reply or exception per command."""
    pipe = client.pipeline(transaction=transaction)
    for command in commands:
        # execute_command: a cluster pipeline refuses pipe.evalsha, not EVALSHA itself
        pipe.execute_command(*command)
    return list(pipe.execute(raise_on_error=False))


def run_batch(client: Client, calls: list[Call], resend: Resend = "missing") -> list[Reply]:
    """Send script ``calls`` in one pipeline (no transaction); one result per call."""
    batch = Batch(client)
    for name, keys, args in calls:
        batch.add(name, keys, args)
    return batch.execute(resend)
