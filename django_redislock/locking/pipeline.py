"""Many script calls in one pipeline: the watchdog's renewals and the admin index pages.

On a single server a pipeline is one round trip; redis-py's cluster pipeline
sends one request per master that owns a key of the batch.
"""

from __future__ import annotations

import hashlib
from functools import cache
from typing import Any

import redis

from ..calls.node import Node
from ..scripts import source

Call = tuple[str, list[str], list[Any]]


@cache
def sha_of(name: str) -> str:
    """The SHA1 under which Redis caches the script ``name``."""
    return hashlib.sha1(source(name).encode()).hexdigest()


def run_scripts(backend: Node, calls: list[Call]) -> list[Any]:
    """Send ``calls`` (script, keys, args) in one pipeline; return one result per call.

    A failed call's result is its exception. When the server had forgotten a
    script (restart, ``SCRIPT FLUSH``), the scripts are loaded and the batch resent.
    """
    if not calls:
        return []
    client = backend.client
    with backend.errors():
        results = _send(client, calls)
        if any(isinstance(r, redis.exceptions.NoScriptError) for r in results):
            for name in {call[0] for call in calls}:
                client.script_load(source(name))
            results = _send(client, calls)
    return results


def _send(client: Any, calls: list[Call]) -> list[Any]:
    if isinstance(client, redis.RedisCluster):
        return _send_cluster(client, calls)
    return _send_pipeline(client, calls)


def _send_pipeline(client: Any, calls: list[Call]) -> list[Any]:
    pipe = client.pipeline(transaction=False)
    for name, keys, args in calls:
        pipe.execute_command("EVALSHA", sha_of(name), len(keys), *keys, *args)
    return list(pipe.execute(raise_on_error=False))


def _send_cluster(client: Any, calls: list[Call]) -> list[Any]:
    """One plain pipeline per master, grouped by the slot of each call's keys.

    redis-py's cluster pipeline asks the server ``COMMAND GETKEYS`` once per
    EVALSHA to route it, which would add a round trip per call. A call whose
    slot moved meanwhile (MOVED/ASK) is resent through the cluster client.
    """
    by_node: dict[str, list[int]] = {}
    nodes: dict[str, Any] = {}
    for position, (_, keys, _) in enumerate(calls):
        node = client.nodes_manager.get_node_from_slot(client.keyslot(keys[0]))
        by_node.setdefault(node.name, []).append(position)
        nodes[node.name] = node
    results: list[Any] = [None] * len(calls)
    for name, positions in by_node.items():
        node_client = client.get_redis_connection(nodes[name])
        replies = _send_pipeline(node_client, [calls[p] for p in positions])
        for position, reply in zip(positions, replies, strict=True):
            results[position] = reply
    for position, reply in enumerate(results):
        if isinstance(reply, redis.ResponseError) and str(reply).startswith(("MOVED", "ASK")):
            script, keys, args = calls[position]
            try:
                results[position] = client.evalsha(sha_of(script), len(keys), *keys, *args)
            except redis.ResponseError as exc:
                results[position] = exc
    return results
