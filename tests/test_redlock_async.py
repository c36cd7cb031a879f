"""Redlock's asyncio twins (native, cancellation-safe) and its release past the validity."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from django_redislock.backends.redlock import RedlockBackend
from django_redislock.exceptions import LockLost
from django_redislock.locking.watchdog import watchdog

from .conftest import reached
from .servers import RedisProcess
from .test_lock_cancellation import SlowReplies


def redlock(urls: list[str], **options: Any) -> RedlockBackend:
    opts = {"QUARANTINE_FRESH_MASTERS": False, "MASTER_TIMEOUT": 2.0, **options}
    prefix = f"rla{uuid.uuid4().hex[:8]}"
    return RedlockBackend("quorum", {"LOCATION": urls, "KEY_PREFIX": prefix, "OPTIONS": opts})


@pytest.fixture
def urls(redlock_servers: list[RedisProcess]) -> list[str]:
    return [server.url for server in redlock_servers]


@pytest.fixture
def slow_urls(redlock_servers: list[RedisProcess]) -> Iterator[list[str]]:
    """The masters behind proxies that hold each reply for 20 ms."""
    proxies = [SlowReplies(server.port) for server in redlock_servers]
    yield [proxy.url for proxy in proxies]
    for proxy in proxies:
        proxy.stop()


def holders(servers: list[RedisProcess], lock: Any) -> int:
    return sum(bool(server.client().exists(lock._key)) for server in servers)


def test_async_twins_use_no_worker_thread(urls: list[str]) -> None:
    backend = redlock(urls)

    async def scenario() -> None:
        lock = backend.lock("native", ttl=5)
        assert await lock.acquire_async(blocking=False)
        await lock.extend_async(5)
        await lock.ensure_held_async()
        assert await lock.owned_async() and await lock.locked_async()
        other = backend.lock("native", ttl=5)
        assert not await other.acquire_async(timeout=0.2)  # waits on a master's wake-up list
        await lock.release_async()
        assert not await lock.locked_async()

    asyncio.run(scenario())
    assert backend._pool is None  # the thread pool of the sync calls was never started


def test_cancelled_acquire_leaves_no_grant_and_nothing_renewed(
    slow_urls: list[str], redlock_servers: list[RedisProcess]
) -> None:
    backend = redlock(slow_urls)
    lock = backend.lock("cut", ttl=1, watchdog=True)

    async def scenario() -> None:
        await lock.locked_async()  # connected: the cut lands inside the grant's round trip
        task = asyncio.ensure_future(lock.acquire_async(blocking=False))
        await asyncio.sleep(0.03)  # the grants are on the masters, their replies not yet here
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(scenario())
    assert not lock.held_by_me() and watchdog.registered() == 0
    assert holders(redlock_servers, lock) == 0
    time.sleep(1.5)  # a grant renewed by the watchdog would outlive its TTL
    assert holders(redlock_servers, lock) == 0
    assert redlock(slow_urls).lock("cut", ttl=1).acquire(blocking=False)


def test_cancelled_release_stops_renewal_and_releases(
    slow_urls: list[str], redlock_servers: list[RedisProcess]
) -> None:
    backend = redlock(slow_urls)
    lock = backend.lock("cut-release", ttl=1, watchdog=True)

    async def scenario() -> None:
        acquired = asyncio.Event()

        async def hold_then_release() -> None:  # one task: a lock belongs to its acquirer
            assert await lock.acquire_async(blocking=False)
            acquired.set()
            await lock.release_async()

        task = asyncio.ensure_future(hold_then_release())
        await reached(acquired, task)
        await asyncio.sleep(0.005)  # the release is on its way, its replies are not
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(scenario())
    assert not lock.held_by_me() and watchdog.registered() == 0
    assert holders(redlock_servers, lock) == 0


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_release_past_the_validity_raises_lock_lost_while_a_quorum_still_holds(
    urls: list[str], redlock_servers: list[RedisProcess], flavour: str
) -> None:
    # validity = ttl - 40 % drift allowance: 1.2 s of a 2 s hold whose keys live 2 s
    backend = redlock(urls, CLOCK_DRIFT_FACTOR=0.4)
    lock = backend.lock("late", ttl=2)

    def late_release() -> None:
        assert lock.acquire(blocking=False)
        time.sleep(1.4)
        assert holders(redlock_servers, lock) == 5  # every master still has the keys
        lock.release()

    async def late_release_async() -> None:
        assert await lock.acquire_async(blocking=False)
        await asyncio.sleep(1.4)
        assert holders(redlock_servers, lock) == 5
        await lock.release_async()

    with pytest.raises(LockLost):
        if flavour == "sync":
            late_release()
        else:
            asyncio.run(late_release_async())
    assert holders(redlock_servers, lock) == 0  # released everywhere all the same


def test_client_kwargs_may_set_the_masters_retry_policy(urls: list[str]) -> None:
    from redis.asyncio.retry import Retry as AsyncRetry
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    backend = redlock(urls, CLIENT_KWARGS={"retry": Retry(NoBackoff(), 1)})
    with backend.lock("retrying", ttl=5) as lock:
        assert lock.owned()

    async def scenario() -> Any:
        async with backend.lock("retrying", ttl=5) as held:
            assert await held.owned_async()
        return backend.masters[0].async_client().connection_pool.connection_kwargs["retry"]

    retry = asyncio.run(scenario())
    assert isinstance(retry, AsyncRetry) and retry._retries == 1


def test_a_release_a_master_had_already_applied_counts_as_released(urls: list[str]) -> None:
    backend = redlock(urls)
    lock = backend.lock("resent", ttl=5)
    assert lock.acquire(blocking=False) and lock._hold is not None
    call = lock._release_args(lock._hold.owner, "*")  # one release, as a retry resends it
    first = [master.run(call) for master in backend.masters]
    again = [master.run(call) for master in backend.masters]
    assert [int(r[0]) for r in first] == [1] * 5 and [int(r[0]) for r in again] == [2] * 5
    assert lock._release_count(again) == (5, 0)
