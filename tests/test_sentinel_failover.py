"""Sentinel: 1 master, 1 replica, 3 sentinels; the master is killed mid-run.

Lock and queue aliases configured in settings (``SENTINELS``,
``LOCATION = redis://<service>/0``) keep working on the promoted replica. The
test prints how many operations failed during the failover and checks that
every failure was one of this library's exceptions, never a raw redis-py one.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.test import override_settings

from django_redislock import locks, queues
from django_redislock.exceptions import RedisLockError

from .servers import RedisProcess, start_replica, start_sentinels

pytestmark = pytest.mark.slow


@pytest.fixture
def topology(tmp_path: Path) -> Iterator[dict[str, Any]]:
    master = RedisProcess(tmp_path / "master").start()
    started: list[RedisProcess] = [master]
    try:
        replica = start_replica(tmp_path / "replica", master)
        started.append(replica)
        sentinels = start_sentinels(tmp_path, master, service="shop", down_after_ms=1000)
        started += sentinels
        yield {"master": master, "replica": replica, "sentinels": sentinels}
    finally:
        for server in reversed(started):
            server.stop()


class Load:
    """Two threads of lock + queue operations, counting outcomes by kind and time."""

    def __init__(self) -> None:
        self.locks = locks["default"]
        self.queue = queues["default"].queue("failover")
        self.ok = 0
        self.failures: Counter[str] = Counter()
        self.foreign: list[BaseException] = []
        self.last_ok = 0.0
        self.stop = threading.Event()
        self._lock = threading.Lock()

    def run(self, worker: int) -> None:
        i = 0
        while not self.stop.is_set() and i < 100_000:
            i += 1
            try:
                # ttl 1 s: a hold whose release failed in the failover ends soon after
                with self.locks.lock(f"item:{i % 3}", ttl=1, timeout=2):
                    self.queue.enqueue(f"w{worker}-{i}", payload={"i": i})
                for task in self.queue.pop(count=1, lease=30):
                    self.queue.ack(task)
                with self._lock:
                    self.ok += 1
                    self.last_ok = time.monotonic()
            except RedisLockError as exc:
                with self._lock:
                    self.failures[type(exc).__name__] += 1
                time.sleep(0.02)
            except Exception as exc:  # the test fails on these: they must not leak
                self.foreign.append(exc)
                time.sleep(0.02)


def test_clients_follow_a_failover_with_only_library_errors(topology: dict[str, Any]) -> None:
    sentinels = [f"127.0.0.1:{s.port}" for s in topology["sentinels"]]
    options = {"SENTINELS": sentinels, "SOCKET_TIMEOUT": 1.0, "SOCKET_CONNECT_TIMEOUT": 0.5}
    alias = {"LOCATION": "redis://shop/0", "KEY_PREFIX": "failover", "OPTIONS": options}
    with override_settings(REDISLOCK_LOCKS={"default": alias}, REDISLOCK_QUEUES={"default": alias}):
        run_failover(topology, Load())
    locks.reset()
    queues.reset()


def run_failover(topology: dict[str, Any], load: Load) -> None:
    threads = [threading.Thread(target=load.run, args=(n,)) for n in range(2)]
    for thread in threads:
        thread.start()
    try:
        time.sleep(1.0)
        before = load.ok
        topology["master"].kill()  # SIGKILL, mid-run
        killed = time.monotonic()
        replica = topology["replica"].client()
        deadline = killed + 30
        while time.monotonic() < deadline and replica.info("replication")["role"] != "master":
            time.sleep(0.05)
        assert replica.info("replication")["role"] == "master", "no failover within 30 s"
        while time.monotonic() < deadline and load.last_ok <= killed:
            time.sleep(0.05)
        resumed = load.last_ok - killed
        at_resume = load.ok
        time.sleep(2.0)  # keep going on the new master for a while
    finally:
        load.stop.set()
        for thread in threads:
            thread.join(30)
    failed = sum(load.failures.values())
    print(
        f"\nsentinel failover: {before} operations before the kill, {load.ok} in all; "
        f"{failed} failed during the failover ({dict(load.failures)}); "
        f"clients resumed {resumed:.2f}s after the kill, then {load.ok - at_resume} in 2 s"
    )
    assert load.foreign == []
    assert 0 < resumed < 30 and load.ok - at_resume >= 20
    client: Any = load.queue.backend.client  # a Sentinel-managed pool
    assert client.connection_pool.get_master_address()[1] == (topology["replica"].port)

    async def asyncio_clients() -> bool:
        # The asyncio clients ask the sentinels too: they reach the promoted replica.
        async with locks["default"].lock("async-after-failover", ttl=5):
            return await load.queue.enqueue_async("async-after-failover", payload={})

    assert asyncio.run(asyncio_clients()) is True
