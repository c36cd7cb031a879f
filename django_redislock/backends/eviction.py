"""Read a lock server's ``maxmemory-policy`` for the deploy check (``redislock.E013``).

A server allowed to evict keys (``allkeys-*``, ``volatile-*``) may drop a held lock's key under
memory pressure, and another process then acquires it while the first still holds; under
``allkeys-*`` it may drop the bucket's fence counter too, which then starts again at 1. Only
``noeviction`` keeps exclusion. This is the one check that talks to Redis, so it runs with
``manage.py check --deploy`` only, once per server, on a fresh connection with a short timeout
and no retries (docs/scale.md).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from redis.backoff import NoBackoff
from redis.retry import Retry

from ..conf import CONNECTION_OPTIONS
from ..connections import create_client, redact

#: Seconds the check waits for a server (connect and reply), with no retry.
CHECK_TIMEOUT = 2.0


def _probe_options(options: Mapping[str, Any]) -> dict[str, Any]:
    client_kwargs = {**options.get("CLIENT_KWARGS", {}), "retry": Retry(NoBackoff(), 0)}
    defaults = {key: option.default for key, option in CONNECTION_OPTIONS.items()}
    return {
        **defaults,
        **options,
        "SOCKET_TIMEOUT": CHECK_TIMEOUT,
        "SOCKET_CONNECT_TIMEOUT": CHECK_TIMEOUT,
        "CLIENT_KWARGS": client_kwargs,
    }


def _policies(client: Any) -> Iterator[tuple[str, str]]:
    """(server, policy) for each primary behind ``client``."""
    if hasattr(client, "get_primaries"):  # a cluster: every primary holds lock buckets
        for node in client.get_primaries():
            reply = client.config_get("maxmemory-policy", target_nodes=node)
            yield node.name, _policy(reply)
        return
    yield "", _policy(client.config_get("maxmemory-policy"))


def _policy(reply: Any) -> str:
    value = reply.get("maxmemory-policy", reply.get(b"maxmemory-policy", ""))
    return value.decode() if isinstance(value, bytes) else str(value)


def eviction_policies(
    locations: list[Any], options: Mapping[str, Any]
) -> list[tuple[str, str | None, str]]:
    """(server, policy or None when unreadable, reason) for each server of a lock alias.

    ``locations``: one LOCATION per independent server (a Redlock alias has several).
    ``embedded://`` and ``cache://`` servers are skipped: the app starts the embedded one
    itself (with no maxmemory), and a cache alias is checked where the cache is set up.
    """
    found: list[tuple[str, str | None, str]] = []
    probe = _probe_options(options)
    for location in locations:
        if isinstance(location, str) and location.startswith(("embedded://", "cache://")):
            continue
        where = redact(location)
        client = None
        try:
            client = create_client(location, probe)
            for node, policy in _policies(client):
                found.append((f"{where} ({node})" if node else where, policy, ""))
        except Exception as exc:  # refused CONFIG, unreachable, auth: say it was not read
            found.append((where, None, f"{type(exc).__name__}: {exc}"))
        finally:
            if client is not None:
                client.close()
    return found
