"""Replica acknowledgement of a grant (``OPTIONS['MIN_REPLICAS_ACK']``).

Redis replicates asynchronously: a master that fails right after granting a
lock may take the grant with it, and the promoted replica hands the lock out
again while the first holder still works. ``WAIT n timeout`` narrows that
window: it returns once ``n`` replicas have acknowledged every write that *this
connection* made. So the grant script and the ``WAIT`` go out in one pipeline
on one connection (to the master that owns the lock's slot on a Cluster).

This is not a consensus: a replica that acknowledged can still lose the race
for promotion (Sentinel picks by offset, priority and run id). It makes the
loss of an acknowledged grant need two failures instead of one.

When fewer replicas answer in time, ``ON_REPLICA_TIMEOUT`` decides: ``"fail"``
(fail closed) undoes the grant with the lock's own release script and raises
:class:`~django_redislock.exceptions.ReplicaAckTimeout`; ``"proceed"`` (fail
open) keeps it and logs a warning.
"""

from __future__ import annotations

import logging
from typing import Any

from ..calls.batch import Batch
from ..calls.node import Node
from ..exceptions import ReplicaAckTimeout

logger = logging.getLogger("django_redislock.locks")

#: The scripts that grant a hold (their ARGV[1] is the owner, result {1, fence, ...}).
GRANT_SCRIPTS = frozenset({"lock_acquire", "lock_rw_read", "lock_rw_write", "semaphore_acquire"})


def wants_ack(backend: Node, script: str) -> bool:
    """True when ``script`` grants and the alias asks for replica acknowledgements."""
    return script in GRANT_SCRIPTS and bool(backend.options.get("MIN_REPLICAS_ACK"))


def _node_client(backend: Node, key: str) -> Any:
    client: Any = backend.client
    if backend.is_cluster:
        node = client.nodes_manager.get_node_from_slot(client.keyslot(key))
        return client.get_redis_connection(node)
    return client


def call_with_ack(lock: Any, call: tuple[str, list[str], list[Any]]) -> Any:
    """Run a grant script and ``WAIT`` on one connection; apply ``ON_REPLICA_TIMEOUT``."""
    name, keys, args = call
    backend = lock.backend
    needed = int(backend.options["MIN_REPLICAS_ACK"])
    wait = [needed, max(1, int(backend.options["REPLICA_ACK_TIMEOUT"] * 1000))]
    with backend.errors():
        batch = Batch(_node_client(backend, keys[0]))
        batch.add(name, keys, args)
        batch.command("WAIT", *wait)
        # a grant answered NOSCRIPT did not run: it is sent again with its WAIT (which only
        # counts acknowledgements, so sending it twice is harmless)
        result, acked = batch.execute(resend="rest")
    for reply in (result, acked):
        if isinstance(reply, Exception):
            raise reply
    if int(result[0]) != 1 or int(acked) >= needed:
        return result
    message = (
        f"lock {lock.name!r}: {int(acked)} of {needed} replicas acknowledged the grant within "
        f"{backend.options['REPLICA_ACK_TIMEOUT']:g}s"
    )
    if backend.options["ON_REPLICA_TIMEOUT"] == "proceed":
        logger.warning("%s; proceeding (ON_REPLICA_TIMEOUT='proceed')", message)
        return result
    lock._call_plain(lock._abandon_call(str(args[0])))  # takes back exactly this grant
    raise ReplicaAckTimeout(f"{message}; the grant was released", name=lock.name)
