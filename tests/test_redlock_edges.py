"""Redlock edges of issue 23 (item 7): lost fence-write replies.

Through fault proxies in front of 3 masters (quorum 2). The fence write is
``redlock_fence``, matched by its script's SHA-1 in the ``EVALSHA``.
"""

from __future__ import annotations

import asyncio
import hashlib
import uuid

import pytest

from django_redislock.exceptions import ConnectionFailed
from django_redislock.locking.keys import lock_key
from django_redislock.scripts import source

from .faults import contains
from .proxied import ProxiedTarget


def _fence_sha() -> str:
    return hashlib.sha1(source("redlock_fence").encode()).hexdigest()


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_lost_fence_write_replies_raise_connection_failed_and_leave_nothing(
    proxied_redlock: ProxiedTarget, mode: str
) -> None:
    """The grant reached every master, the fence write too, but its replies were lost:
    the outcome is unknown, so the call raises (never False for a free lock) and what it
    was granted is released."""
    backend = proxied_redlock.lock_backend()
    name = f"fence-lost:{uuid.uuid4().hex[:8]}"
    with backend.lock(f"{name}:warm", ttl=10):  # loads the scripts on every master
        pass
    faults = proxied_redlock.drop_reply(contains(_fence_sha()), then="cut")
    lock = backend.lock(name, ttl=10)
    with pytest.raises(ConnectionFailed):
        if mode == "sync":
            lock.acquire(blocking=False)
        else:
            asyncio.run(lock.acquire_async(blocking=False))
    assert all(fault.fired.is_set() for fault in faults), "a master got no fence write"
    key = lock_key(backend, name, "l")
    assert [raw.exists(key) for raw in proxied_redlock.raw_clients()] == [0, 0, 0]
    proxied_redlock.clear()
    other = backend.lock(name, ttl=10)
    assert other.acquire(blocking=False)
    other.release()
