"""When a hot call may skip redis-py's ``execute_command`` wrapper (one rule for the app).

The lock scripts (:mod:`django_redislock.locks.transport`) and the enqueue script
(:mod:`django_redislock.queue.wire`) send their ``EVALSHA`` on a connection of
the client's own pool: redis-py's wrapper costs more client time per command
than those scripts cost the server. That is only safe where the wrapper adds
nothing a command needs, which :func:`direct_pool` decides: a plain
``redis.Redis`` (standalone; Sentinel, Cluster, fakeredis and custom client
classes keep ``execute_command``), a standard pool, redis-py >= 5.3, no
client-side cache, no single-connection client, and redis-py's OpenTelemetry
metrics off (with them on every command goes through the wrapper, so none is
missing from the metrics).
"""

from __future__ import annotations

from typing import Any

import redis


def redis_py_version() -> tuple[int, ...]:
    """redis-py's major and minor version."""
    parts = []
    for part in redis.__version__.split(".")[:2]:
        digits = "".join(ch for ch in part if ch.isdigit())
        parts.append(int(digits or 0))
    return tuple(parts)


def metrics_enabled() -> bool:
    """True when redis-py's OpenTelemetry metrics are on (they time commands in the wrapper)."""
    try:
        from redis.observability.providers import get_observability_instance
    except ImportError:  # redis-py without observability hooks
        return False
    try:
        return get_observability_instance().get_provider_manager() is not None
    except Exception:  # an unknown redis-py layout: stay on execute_command
        return True


def direct_pool(client: Any) -> Any:
    """The pool whose connections a hot call may use directly, or None (use the wrapper)."""
    pool = getattr(client, "connection_pool", None)
    if (
        type(client) is not redis.Redis
        or type(pool) not in (redis.ConnectionPool, redis.BlockingConnectionPool)
        or getattr(client, "connection", None) is not None
        or getattr(pool, "cache", None) is not None
        or redis_py_version() < (5, 3)
        or metrics_enabled()
    ):
        return None
    return pool
