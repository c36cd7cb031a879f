"""Sentinel: 1 master, 1 replica, 3 sentinels; the master is killed mid-run.

Lock and queue aliases configured in settings (``SENTINELS``,
``LOCATION = redis://<service>/0``) keep working on the promoted replica, and so
do the coordination primitives of a lock alias (semaphore, fair lock, latch, rate
limiter: each counted on its own). Each test prints how many operations failed
during the failover and checks that every failure was one of this library's
exceptions, never a raw redis-py one.
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


class CoordinationLoad:
    """Bounded loops over the coordination primitives, counting outcomes per primitive.

    Two threads each cycle the semaphore (2 permits, one object shared as documented)
    and two the fair lock (one object per thread), so both see waiters and wake-ups;
    one thread counts latches down and waits on them, one asks the rate limiter. Each
    primitive keeps its own counts, so one that stops working after the failover
    cannot hide behind the others.
    """

    KINDS = ("semaphore", "fair", "latch", "limiter")

    def __init__(self) -> None:
        backend = locks["default"]
        # ttl 1 s: a hold whose release failed in the failover ends soon after
        self.semaphore = backend.semaphore("coord-sem", permits=2, ttl=1)
        # a lock object holds for one thread: one fair lock object per worker
        self.fair = [backend.fair_lock("coord-fair", ttl=1, timeout=2) for _ in range(2)]
        self.limiter = backend.rate_limiter("coord-limit", "1000/s")
        self.backend = backend
        self.ok: Counter[str] = Counter()
        #: attempts answered "no" without an error: no permit in time, the limit refused,
        #: a latch whose count-down the failover lost (replication is asynchronous)
        self.refused: Counter[str] = Counter()
        self.failures: Counter[str] = Counter()
        self.foreign: list[tuple[str, BaseException]] = []
        self.last_ok = dict.fromkeys(self.KINDS, 0.0)
        self.stop = threading.Event()
        self._lock = threading.Lock()

    def semaphore_cycle(self, worker: int, i: int) -> bool:
        permit = self.semaphore.acquire(timeout=2)
        if permit is None:
            return False
        permit.release()
        return True

    def fair_cycle(self, worker: int, i: int) -> bool:
        fair = self.fair[worker]
        if not fair.acquire():
            return False
        fair.release()
        return True

    def latch_cycle(self, worker: int, i: int) -> bool:
        latch = self.backend.latch(f"coord-latch:{worker}:{i}", count=1, ttl=30)
        left = latch.count_down()
        return left == 0 and latch.wait(timeout=2)

    def limiter_cycle(self, worker: int, i: int) -> bool:
        return self.limiter.try_acquire().admitted

    def run(self, kind: str, worker: int) -> None:
        cycle = getattr(self, f"{kind}_cycle")
        i = 0
        while not self.stop.is_set() and i < 100_000:
            i += 1
            try:
                done = cycle(worker, i)
            except RedisLockError as exc:
                with self._lock:
                    self.failures[f"{kind}:{type(exc).__name__}"] += 1
                time.sleep(0.02)
            except Exception as exc:  # the test fails on these: they must not leak
                with self._lock:
                    self.foreign.append((kind, exc))
                time.sleep(0.02)
            else:
                with self._lock:
                    if done:
                        self.ok[kind] += 1
                        self.last_ok[kind] = time.monotonic()
                    else:
                        self.refused[kind] += 1
                if kind == "limiter":
                    time.sleep(0.005)  # well under the rate: refusals mean something


def test_coordination_primitives_follow_a_failover(topology: dict[str, Any]) -> None:
    sentinels = [f"127.0.0.1:{s.port}" for s in topology["sentinels"]]
    options = {"SENTINELS": sentinels, "SOCKET_TIMEOUT": 1.0, "SOCKET_CONNECT_TIMEOUT": 0.5}
    alias = {"LOCATION": "redis://shop/0", "KEY_PREFIX": "coordfail", "OPTIONS": options}
    with override_settings(REDISLOCK_LOCKS={"default": alias}):
        try:
            run_coordination_failover(topology, CoordinationLoad())
        finally:
            locks.reset()


def run_coordination_failover(topology: dict[str, Any], load: CoordinationLoad) -> None:
    workers = [("semaphore", 0), ("semaphore", 1), ("fair", 0), ("fair", 1)]
    workers += [("latch", 0), ("limiter", 0)]
    threads = [threading.Thread(target=load.run, args=worker) for worker in workers]
    for thread in threads:
        thread.start()
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and min(load.ok[k] for k in load.KINDS) < 5:
            time.sleep(0.05)
        before = dict(load.ok)
        assert min(before.get(k, 0) for k in load.KINDS) >= 5, f"slow start: {before}"
        topology["master"].kill()  # SIGKILL, mid-run
        killed = time.monotonic()
        replica = topology["replica"].client()
        deadline = killed + 30
        while time.monotonic() < deadline and replica.info("replication")["role"] != "master":
            time.sleep(0.05)
        assert replica.info("replication")["role"] == "master", "no failover within 30 s"
        while time.monotonic() < deadline and min(load.last_ok.values()) <= killed:
            time.sleep(0.05)
        resumed = {k: load.last_ok[k] > killed for k in load.KINDS}
        at_resume = dict(load.ok)
        # keep going on the new master until every primitive did 10 more (bounded)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and any(
            load.ok[k] - at_resume[k] < 10 for k in load.KINDS
        ):
            time.sleep(0.05)
    finally:
        load.stop.set()
        for thread in threads:
            thread.join(30)
    after = {k: load.ok[k] - at_resume[k] for k in load.KINDS}
    print(
        f"\nsentinel failover (coordination): ok before the kill {before}, in all "
        f"{dict(load.ok)}; refused {dict(load.refused)}; failed {dict(load.failures)}; "
        f"after resuming {after}"
    )
    assert load.foreign == []
    assert all(resumed.values()), f"did not resume after the failover: {resumed}"
    assert min(after.values()) >= 10, after
    assert not any(thread.is_alive() for thread in threads)
    check_after_failover(topology)


def check_after_failover(topology: dict[str, Any]) -> None:
    """Fresh objects work on the promoted replica, sync and asyncio."""
    backend: Any = locks["default"]  # a Redis backend
    client = backend.client  # a Sentinel-managed pool
    assert client.connection_pool.get_master_address()[1] == topology["replica"].port

    semaphore = backend.semaphore("after-sem", permits=2, ttl=5)
    first, second = semaphore.acquire(timeout=5), semaphore.acquire(timeout=5)
    assert first is not None and second is not None and second.fence > first.fence
    assert semaphore.try_acquire() is None and semaphore.held() == 2
    first.release()
    second.release()
    assert semaphore.held() == 0

    fair = backend.fair_lock("after-fair", ttl=5)
    assert fair.acquire(timeout=5) is True and fair.locked()
    fair.release()
    assert not fair.locked() and fair.waiting() == 0

    latch = backend.latch("after-latch", count=2, ttl=30)
    assert latch.count() == 2 and latch.wait(timeout=0.1) is False
    assert latch.count_down() == 1 and latch.count_down() == 0
    assert latch.wait(timeout=5) is True

    limiter = backend.rate_limiter("after-limit", "10/s", burst=2)
    assert limiter.try_acquire().admitted and limiter.try_acquire().admitted
    assert not limiter.try_acquire().admitted

    async def asyncio_clients() -> tuple[bool, bool, bool, bool]:
        # The asyncio clients ask the sentinels too: they reach the promoted replica.
        async with backend.semaphore("after-sem-async", permits=2, ttl=5) as permit:
            held = await permit.owned_async()
        async_fair = backend.fair_lock("after-fair-async", ttl=5)
        granted = await async_fair.acquire_async(timeout=5)
        await async_fair.release_async()
        async_latch = backend.latch("after-latch-async", count=1, ttl=30)
        waiter = asyncio.ensure_future(async_latch.wait_async(timeout=10))
        await async_latch.count_down_async()
        opened = await waiter
        admitted = (await limiter.try_acquire_async(key="async")).admitted
        return held, granted, opened, admitted

    assert asyncio.run(asyncio_clients()) == (True, True, True, True)
