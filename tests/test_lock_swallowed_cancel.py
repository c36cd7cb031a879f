"""A cancel() that redis-py swallows must still end a lock's asyncio acquire.

On Python 3.11 with redis-py 8.1, a cancellation that lands while a command's reply is
awaited can be lost inside redis-py's asyncio ``execute_command``, which then returns the
reply; the lock's script call and its wait raise it again (``calls.wait.raise_swallowed_cancel``).
The semaphore's and the fair lock's own sweeps are in their test modules.
"""

from __future__ import annotations

import asyncio

import pytest

from .conftest import RedisTarget


@pytest.fixture(params=["single", "cluster"])
def real_target(request: pytest.FixtureRequest) -> RedisTarget:
    target: RedisTarget = request.getfixturevalue(f"{request.param}_target")
    return target


def test_a_cancelled_mutex_waiter_stops_at_once(real_target: RedisTarget) -> None:
    """The plain mutex, the same sweep: a cancel() in an acquire_async's first loop turns
    was swallowed inside redis-py's call, and the acquire went on waiting until its timeout."""
    backend = real_target.lock_backend()

    async def one(turns: int) -> None:
        holder = backend.lock("swallowed", ttl=300)
        lock = backend.lock("swallowed", ttl=300, timeout=30)
        assert not await lock.locked_async()  # connected: the sweep is of the acquire's awaits
        assert await holder.acquire_async()
        task = asyncio.ensure_future(lock.acquire_async())
        for _ in range(turns):
            await asyncio.sleep(0)
        task.cancel()
        done, _ = await asyncio.wait({task}, timeout=10)
        assert done, f"the cancellation after {turns} turns did not end the acquire"
        assert task.cancelled() or not task.result()
        assert not lock.held_by_me()
        await holder.release_async()

    async def sweep() -> None:
        for turns in range(25):
            await one(turns)

    asyncio.run(sweep())
