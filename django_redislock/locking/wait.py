"""Blocking until a lock's signal list is pushed, or a client-side deadline passes.

``BLPOP`` wakes as soon as a release pushes the list, but Redis checks blocked
clients' own timeouts only on its cron tick (every 100 ms at the default
``hz 10``), which would make a waiter notice an *expiry* up to 100 ms late. So
the deadline is kept on the client: the ``BLPOP`` is sent with a longer server
timeout and the reply is awaited for exactly ``seconds``; if nothing came, the
connection (still blocked on the server) is closed instead of being reused.
That costs a reconnect, but only on the path where a holder vanished without
releasing or the waiter gave up.

Clients that are not redis-py's own (``CLIENT_CLASS``, e.g. fakeredis) use a
plain ``BLPOP``.
"""

from __future__ import annotations

import asyncio
from typing import Any

import redis
import redis.asyncio

from ..calls.node import Node

#: Extra server-side timeout beyond the client-side deadline (seconds).
SERVER_SLACK = 1.0


def _server_timeout(seconds: float) -> str:
    return f"{seconds + SERVER_SLACK:.3f}"


def wait_for_signal(backend: Node, key: str, seconds: float) -> None:
    """Block until ``key`` is pushed (consuming one element) or ``seconds`` pass."""
    client = backend.client
    with backend.errors():
        if backend.options["CLIENT_CLASS"] is not None:
            client.blpop([key], timeout=seconds)
            return
        pool: Any  # redis-py's connection API is untyped
        if isinstance(client, redis.RedisCluster):
            cluster: Any = client
            pool = cluster.get_redis_connection(cluster.get_node_from_key(key)).connection_pool
        else:
            pool = client.connection_pool
        conn = pool.get_connection()
        try:
            conn.send_command("BLPOP", key, _server_timeout(seconds))
            if conn.can_read(timeout=seconds):
                conn.read_response()
            else:
                conn.disconnect()
        except redis.ResponseError:
            pass  # e.g. MOVED during resharding: the next acquire attempt routes afresh
        except BaseException:
            conn.disconnect()
            raise
        finally:
            pool.release(conn)


async def wait_for_signal_async(backend: Node, key: str, seconds: float) -> None:
    """The asyncio twin of :func:`wait_for_signal`."""
    client = backend.async_client()
    with backend.errors():
        if backend.options["CLIENT_CLASS"] is not None:
            await client.blpop([key], timeout=seconds)
            return
        if isinstance(client, redis.asyncio.RedisCluster):
            node = client.get_node_from_key(key)
            if node is None:
                raise redis.exceptions.SlotNotCoveredError(f"no node serves the slot of {key!r}")
            conn = node.acquire_connection()
            try:
                await _blpop(conn, key, seconds)
            finally:
                node.release(conn)
            return
        pool: Any = client.connection_pool
        conn = await pool.get_connection()
        try:
            await _blpop(conn, key, seconds)
        finally:
            await pool.release(conn)


async def _blpop(conn: Any, key: str, seconds: float) -> None:
    try:
        if not getattr(conn, "is_connected", True):
            await conn.connect()
        await conn.send_command("BLPOP", key, _server_timeout(seconds))
        await asyncio.wait_for(conn.read_response(), timeout=seconds)
    except asyncio.TimeoutError:
        await conn.disconnect()
    except redis.ResponseError:
        pass
    except BaseException:
        await conn.disconnect()
        raise
