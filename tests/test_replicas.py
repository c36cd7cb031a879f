"""MIN_REPLICAS_ACK: a grant waits for replica acknowledgement, failing closed or open."""

from __future__ import annotations

import asyncio
import logging
import signal
import time
from collections.abc import Iterator

import pytest

from django_redislock.backends.redis import RedisLockBackend
from django_redislock.exceptions import ConfigurationError, ReplicaAckTimeout

from .conftest import RedisTarget
from .servers import RedisProcess, start_replica


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RedisProcess, RedisProcess]]:
    base = tmp_path_factory.mktemp("replicated")
    master = RedisProcess(base / "master").start()
    try:
        replica = start_replica(base / "replica", master)
    except BaseException:
        master.stop()
        raise
    yield master, replica
    replica.stop()
    master.stop()


def backend(master: RedisProcess, **options: object) -> RedisLockBackend:
    # Acks take milliseconds; the generous timeout only matters on a loaded machine.
    opts = {"MIN_REPLICAS_ACK": 1, "REPLICA_ACK_TIMEOUT": 2.0, **options}
    return RedisLockBackend("replicated", {"LOCATION": master.url, "OPTIONS": opts})


class Paused:
    """SIGSTOP a server for the block: it stops acknowledging, then catches up."""

    def __init__(self, server: RedisProcess) -> None:
        self.server = server

    def __enter__(self) -> None:
        assert self.server.process is not None
        self.server.process.send_signal(signal.SIGSTOP)

    def __exit__(self, *exc: object) -> None:
        assert self.server.process is not None
        self.server.process.send_signal(signal.SIGCONT)


def test_a_grant_returns_once_a_replica_has_it(pair: tuple[RedisProcess, RedisProcess]) -> None:
    master, replica = pair
    lock = backend(master).lock("acked", ttl=5)
    with lock:
        assert replica.client().hget(lock._key, "f") == str(lock.fence).encode()
    rw = backend(master).read_write_lock("acked-rw", ttl=5)
    with rw.write() as writer:
        written = writer.fence
    with rw.read() as reader:
        assert reader.fence > written > 0


def test_fail_closed_undoes_the_grant(pair: tuple[RedisProcess, RedisProcess]) -> None:
    master, replica = pair
    closed = backend(master, REPLICA_ACK_TIMEOUT=0.2)
    lock = closed.lock("closed", ttl=5)
    with Paused(replica):
        started = time.monotonic()
        with pytest.raises(ReplicaAckTimeout, match="0 of 1 replicas"):
            lock.acquire()
        # the 0.2 s ack timeout ended it: a WAIT without one blocks until the replica answers
        assert time.monotonic() - started < 10.0
        assert not lock.locked() and not lock.held_by_me()
        with pytest.raises(ReplicaAckTimeout):
            closed.read_write_lock("closed-rw", ttl=5).write().acquire()
        reads = closed.read_write_lock("closed-read", ttl=5)
        with pytest.raises(ReplicaAckTimeout):
            reads.read().acquire()
        assert reads.state()["readers"] == 0  # the read grant was undone too
    resumed = backend(master).lock("closed", ttl=5)
    assert resumed.acquire(blocking=False)  # the replica answers again: granted
    resumed.release()


def test_fail_open_keeps_the_grant_and_warns(
    pair: tuple[RedisProcess, RedisProcess], caplog: pytest.LogCaptureFixture
) -> None:
    master, replica = pair
    lock = backend(master, ON_REPLICA_TIMEOUT="proceed", REPLICA_ACK_TIMEOUT=0.2).lock(
        "open", ttl=5
    )
    with Paused(replica), caplog.at_level(logging.WARNING, "django_redislock.locks"):
        assert lock.acquire(blocking=False)
    assert "proceeding (ON_REPLICA_TIMEOUT='proceed')" in caplog.text
    lock.release()


def test_async_acquire_waits_too(pair: tuple[RedisProcess, RedisProcess]) -> None:
    master, replica = pair

    async def scenario() -> None:
        lock = backend(master, REPLICA_ACK_TIMEOUT=0.2).lock("async-acked", ttl=5)
        with Paused(replica), pytest.raises(ReplicaAckTimeout):
            await lock.acquire_async()
        lock = backend(master).lock("async-acked", ttl=5)
        async with lock:
            assert replica.client().exists(lock._key)

    asyncio.run(scenario())


def test_bad_replica_options_are_configuration_errors() -> None:
    with pytest.raises(ConfigurationError, match="ON_REPLICA_TIMEOUT"):
        RedisLockBackend("x", {"OPTIONS": {"ON_REPLICA_TIMEOUT": "maybe"}})
    with pytest.raises(ConfigurationError, match="MIN_REPLICAS_ACK"):
        RedisLockBackend("x", {"OPTIONS": {"MIN_REPLICAS_ACK": -1}})


def test_on_a_cluster_the_wait_goes_to_the_lock_slots_master(cluster_target: RedisTarget) -> None:
    # The test cluster has no replicas: a grant cannot be acknowledged, and is undone.
    backend = cluster_target.lock_backend(MIN_REPLICAS_ACK=1, REPLICA_ACK_TIMEOUT=0.05)
    lock = backend.lock("cluster-acked", ttl=5)
    with pytest.raises(ReplicaAckTimeout, match="0 of 1"):
        lock.acquire(blocking=False)
    assert not lock.locked()
