"""The lock commands and the system checks against a Redis Cluster alias.

The queue commands, the admin pages, the drain_queue process tests and the
seckill process tests already run on the cluster through ``redis_target`` /
``real`` fixtures; ``list_locks`` / ``release_lock`` only ran on the single
server, so this fills that gap: locks spread over every master (one index
bucket per slot) are listed across all of them and released by name.
"""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.test import override_settings

from django_redislock import locks
from django_redislock.exceptions import LockLost

from .conftest import RedisTarget


def run(*args: str) -> str:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def test_list_and_release_locks_on_every_master(cluster_target: RedisTarget) -> None:
    alias = {**cluster_target.params(), "KEY_PREFIX": "test"}
    with override_settings(REDISLOCK_LOCKS={"default": alias}):
        held = [locks["default"].lock(f"spread:{i}", ttl=30) for i in range(24)]
        for lock in held:
            lock.acquire()
        ports = {cluster_target.raw.get_node_from_key(lock._key).port for lock in held}
        assert len(ports) == 3  # the locks live on all 3 masters
        document = json.loads(run("list_locks", "--json", "--limit", "50"))
        assert document["total"] == 24
        listed = sorted(row["name"] for row in document["locks"])
        assert listed == sorted(lock.name for lock in held)
        assert "Released 'spread:7'" in run("release_lock", "spread:7", "--yes")
        with pytest.raises(LockLost):
            held[7].ensure_held()
        assert json.loads(run("list_locks", "--json"))["total"] == 23
        for lock in held[:7] + held[8:]:
            lock.release()
        assert json.loads(run("list_locks", "--json"))["total"] == 0
