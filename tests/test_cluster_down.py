"""``CLUSTERDOWN`` on the hot paths: the queue's, the locks' and the rate limiter's calls.

What a restarted master's slots answer until the cluster agrees it is back (once redis-py's
own retries are spent) is a node out of reach: the command did not run. Callers that ride out
outages (a worker, a waiter, a buyer) catch :class:`ConnectionFailed`; a raw
``ClusterDownError`` ends their thread instead. These paths send with a plain ``try`` (not
``backend.errors()``), so each must hand ``ClusterDownError`` on too
(``tests/test_seckill_master_restart.py`` has the flash sale's).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from redis.exceptions import ClusterDownError

from django_redislock.exceptions import ConnectionFailed

from .conftest import RedisTarget


@pytest.fixture
def down(cluster_target: RedisTarget, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """Make every command of the cluster client answer ``CLUSTERDOWN`` (after setup)."""

    def refuse(*args: object, **kwargs: object) -> object:
        raise ClusterDownError("The cluster is down")

    def go(client: Any) -> None:
        monkeypatch.setattr(client, "execute_command", refuse)

    yield go


def test_an_enqueue_and_a_claim_are_connection_failures(
    cluster_target: RedisTarget, down: Any
) -> None:
    queue = cluster_target.queue_backend().queue("cluster-down")
    queue.enqueue("t1", {"n": 1})  # the prepared calls exist: the hot path is taken below
    down(queue.backend.client)
    with pytest.raises(ConnectionFailed, match="unreachable"):
        queue.enqueue("t2", {"n": 2})
    with pytest.raises(ConnectionFailed, match="unreachable"):
        queue.claim(1, lease=5)


def test_a_lock_acquire_is_a_connection_failure(cluster_target: RedisTarget, down: Any) -> None:
    backend = cluster_target.lock_backend()
    warm = backend.lock("cluster-down", ttl=5)
    assert warm.acquire(blocking=False)
    warm.release()
    down(backend.client)
    with pytest.raises(ConnectionFailed, match="unreachable"):
        backend.lock("cluster-down", ttl=5).acquire(blocking=False)


def test_a_rate_limiter_take_is_a_connection_failure(
    cluster_target: RedisTarget, down: Any
) -> None:
    limiter = cluster_target.lock_backend().rate_limiter(
        "cluster-down", "1000/s", local_refusals=False
    )
    assert limiter.try_acquire().admitted
    down(limiter.backend.client)
    with pytest.raises(ConnectionFailed, match="unreachable"):
        limiter.try_acquire()
