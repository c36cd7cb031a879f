"""What an evicting server does to a held lock, for the soak's separately labelled category.

A lock server must run with ``maxmemory-policy noeviction`` (the system check refuses any
other policy on a lock alias; issue 23, 5). This probe documents what happens without that
check: a server with a small ``maxmemory`` and an evicting policy, one process holding a
lock with a 30 s TTL, then other writes until the server runs out of memory. Its findings
are *expected* (the configuration is refused), reported apart from the violations, never
counted as a pass.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from pathlib import Path

import redis

from django_redislock.backends.redis import RedisLockBackend
from django_redislock.exceptions import LockLost

from ..servers import RedisProcess

POLICIES = ("allkeys-lru", "volatile-lru")
#: Bounded: at most this many 10 kB filler writes per policy (4 MB server).
MAX_FILL = 2000


def probe(directory: Path, policy: str) -> Counter[str]:
    """One policy: hold a lock, fill the server, try a second holder; what happened."""
    found: Counter[str] = Counter()
    server = RedisProcess(
        directory / policy, extra=["--maxmemory", "4mb", "--maxmemory-policy", policy]
    ).start()
    try:
        params = {"LOCATION": server.url, "KEY_PREFIX": "ev", "OPTIONS": {}}
        first = RedisLockBackend("evict-a", params).lock("order:1", ttl=30)
        second = RedisLockBackend("evict-b", params).lock("order:1", ttl=30)
        assert first.acquire(blocking=False)
        raw = server.client()
        held = [key for key in raw.scan_iter(match="ev:*:l:order:1")]
        blob = b"x" * 10_000
        for i in range(MAX_FILL):
            try:
                raw.set(f"filler:{i}", blob, ex=3600 if policy.startswith("volatile") else None)
            except redis.ResponseError:  # OOM: nothing left to evict
                found[f"eviction ({policy}): filler refused (OOM)"] += 1
                break
            if i % 50 == 0 and not any(raw.exists(key) for key in held):
                break
        if held and not any(raw.exists(key) for key in held):
            found[f"eviction ({policy}): held lock evicted"] += 1
        found += refused(server.url, policy)
        with contextlib.suppress(redis.RedisError):
            if second.acquire(blocking=False):
                found[f"eviction ({policy}): second holder granted while the first holds"] += 1
                if second.fence <= first.fence:
                    found[f"eviction ({policy}): fence went back"] += 1
                try:
                    second.release()
                except LockLost:  # the full server evicted this hold too: a finding, not a crash
                    found[f"eviction ({policy}): second holder's lock evicted before release"] += 1
    finally:
        server.stop()
    return found


def refused(url: str, policy: str) -> Counter[str]:
    """Whether ``check --deploy`` refuses this server for a lock alias (redislock.E013)."""
    from django.test import override_settings

    from django_redislock.checks import check_eviction
    from django_redislock.handlers import locks

    aliases = {"default": {"LOCATION": url, "OPTIONS": {"EVICTION_CHECK": True}}}
    with override_settings(REDISLOCK_LOCKS=aliases):
        locks.reset()
        try:
            ids = {message.id for message in check_eviction()}
        finally:
            locks.reset()
    if "redislock.E013" in ids:
        return Counter({f"eviction ({policy}): refused by check --deploy (redislock.E013)": 1})
    return Counter({f"eviction ({policy}): NOT refused by the system check": 1})


def probe_all(directory: Path) -> Counter[str]:
    found: Counter[str] = Counter()
    for policy in POLICIES:
        found += probe(directory, policy)
    return found
