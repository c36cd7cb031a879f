"""The history workers' fair-lock trace, on a real server behind a fault proxy.

The checker can only be as right as the trace it reads: a try whose reply was lost and
that was sent again may have been granted at its first send and queued again at its
second, so the trace must mark it resent, whichever layer sent it again (the lock's own
``_resolve``, redis-py's Retry, as half of the workers are configured, or a cluster client's
own retry loop, which every cluster worker has).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from redis.backoff import NoBackoff
from redis.retry import Retry

from django_redislock.backends.redis import RedisLockBackend

from .faults import FaultProxy
from .lockhistory.instrument import CountingRetry, trace_fair
from .proxied import ProxiedTarget
from .servers import RedisProcess


@pytest.fixture
def proxy(redis_server: RedisProcess) -> Iterator[FaultProxy]:
    proxy = FaultProxy(("127.0.0.1", redis_server.port)).start()
    yield proxy
    proxy.close()


def backend(proxy: FaultProxy, retry: Retry) -> RedisLockBackend:
    options: dict[str, Any] = {"SOCKET_TIMEOUT": 0.5, "CLIENT_KWARGS": {"retry": retry}}
    return RedisLockBackend("trace", {"LOCATION": proxy.url, "OPTIONS": options})


def traced_acquire(backend: RedisLockBackend, name: str) -> dict[str, Any]:
    lock = backend.fair_lock(name, ttl=5.0)
    trace: dict[str, Any] = {"tries": []}
    trace_fair(lock, trace)
    assert lock.acquire(timeout=5.0)
    lock.release()
    return trace


@pytest.mark.parametrize("then", ["cut", "silent"])
def test_a_try_redis_py_resent_after_a_lost_reply_is_marked_resent(
    proxy: FaultProxy, then: str
) -> None:
    locks = backend(proxy, CountingRetry(NoBackoff(), 1))
    warm = traced_acquire(locks, "trace-warm")  # loads the scripts: no NOSCRIPT below
    assert [t[2:] for t in warm["tries"]] == [[1, 0, 0]]
    fault = proxy.drop_reply("EVALSHA", then=then)  # type: ignore[arg-type]
    trace = traced_acquire(locks, "trace-lost")
    assert fault.fired.is_set()
    # one try, granted (the resend found the grant of the first send), and marked resent
    assert [t[2:] for t in trace["tries"]] == [[1, 0, 1]]


@pytest.mark.parametrize("then", ["cut", "silent"])
def test_a_try_the_cluster_client_resent_after_a_lost_reply_is_marked_resent(
    proxied_cluster: ProxiedTarget, then: str
) -> None:
    # RedisCluster resends inside its own execute_command loop (its default retries), where
    # no Retry object is called: a try it resent must be marked all the same
    locks = proxied_cluster.lock_backend("trace")
    traced_acquire(locks, "trace-warm")  # loads the scripts (a reload counts as a resend)
    warm = traced_acquire(locks, "trace-warm")
    assert [t[2:] for t in warm["tries"]] == [[1, 0, 0]]
    faults = proxied_cluster.drop_reply("EVALSHA", then=then)  # type: ignore[arg-type]
    trace = traced_acquire(locks, "trace-lost")
    assert any(fault.fired.is_set() for fault in faults)
    assert [t[2:] for t in trace["tries"]] == [[1, 0, 1]]
