"""The count-down latch: every waiter released once at zero (threads, asyncio, processes),
resent count-downs counted once, cancelled waits leave nothing (real server and cluster)."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from django_redislock.backends.redis import RedisLockBackend
from django_redislock.exceptions import InvalidArgument
from django_redislock.locking.latch import CountDownLatch

from .conftest import RedisTarget
from .fair_worker import finish, start
from .processes import wait_for


@pytest.fixture(params=["single", "cluster"])
def real_target(request: pytest.FixtureRequest) -> RedisTarget:
    target: RedisTarget = request.getfixturevalue(f"{request.param}_target")
    return target


def latch(target: RedisTarget, count: int = 3, name: str = "done") -> CountDownLatch:
    backend = RedisLockBackend("test", {**target.params(), "KEY_PREFIX": "test"})
    return backend.latch(name, count=count)


def test_every_waiter_is_released_once_at_zero(real_target: RedisTarget) -> None:
    done = latch(real_target)
    opened: list[bool] = []
    threads = [
        threading.Thread(target=lambda: opened.append(latch(real_target).wait(60)))
        for _ in range(3)
    ]
    for thread in threads:
        thread.start()
    assert done.count_down() == 2 and done.count_down() == 1
    assert done.count() == 1 and opened == []  # not open: nobody was released
    assert all(thread.is_alive() for thread in threads)
    assert done.count_down() == 0
    for thread in threads:
        thread.join(timeout=60)
    assert opened == [True, True, True]
    assert done.count_down() == 0 and done.count() == 0  # stays open, never below zero
    assert latch(real_target, count=9).wait(0) is True  # an existing latch keeps its count
    done.delete()
    assert latch(real_target, count=9).count() == 9  # forgotten: created again


def test_asyncio_waiters_are_released_at_zero(real_target: RedisTarget) -> None:
    async def scenario() -> list[bool]:
        waiters = [asyncio.ensure_future(latch(real_target, 2).wait_async(60)) for _ in range(3)]
        done = latch(real_target, 2)
        assert await done.count_down_async() == 1
        await asyncio.sleep(0.2)
        assert not any(waiter.done() for waiter in waiters)
        assert await done.count_down_async() == 0
        return list(await asyncio.wait_for(asyncio.gather(*waiters), 60))

    assert asyncio.run(scenario()) == [True, True, True]


def test_waiters_and_count_downs_across_processes(real_target: RedisTarget) -> None:
    common = {"name": "done", "count": 3, "order": "{c}:opened"}
    waiters = [start("latch-wait", real_target, **common, id=i) for i in range(3)]
    counters = [start("count-down", real_target, **common) for _ in range(3)]
    lefts = sorted(finish(counter)["left"] for counter in counters)
    assert lefts == [0, 1, 2]
    assert [finish(waiter)["opened"] for waiter in waiters] == [True, True, True]
    assert sorted(int(i) for i in real_target.raw.lrange("{c}:opened", 0, -1)) == [0, 1, 2]


def test_a_resent_count_down_is_counted_once(real_target: RedisTarget) -> None:
    done = latch(real_target, 2)
    call = done._count_down_call("request-1")
    assert [int(x) for x in done._run(call)] == [1, 1]
    assert [int(x) for x in done._run(call)] == [2, 1]  # a resend: answered, not counted
    assert done.count() == 1
    assert done.count_down() == 0
    assert [int(x) for x in done._run(call)] == [2, 0]  # still known after opening


def test_a_wait_times_out_and_a_cancelled_wait_leaves_nothing(real_target: RedisTarget) -> None:
    done = latch(real_target, 1)
    assert done.wait(0.2) is False

    def blocked() -> list[Any]:
        raw = real_target.raw
        if real_target.kind == "cluster":
            node = raw.get_node_from_key(done._signal_key)
            return [c for c in raw.client_list(target_nodes=node) if c.get("cmd") == "blmove"]
        return [c for c in raw.client_list() if c.get("cmd") == "blmove"]

    baseline: list[int] = []

    async def cancelled() -> None:
        waiter = latch(real_target, 1)
        assert await waiter.count_async() == 1  # the client is connected and knows the slots
        before = len(await asyncio.to_thread(blocked))  # other tests' waits on this server
        baseline.append(before)
        task = asyncio.ensure_future(waiter.wait_async(60))
        for _ in range(1000):  # cancelled once it is blocked on the wake-up list
            if task.done() or len(await asyncio.to_thread(blocked)) > before:
                break
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(cancelled())
    keys = sorted({key.decode() for key in real_target.raw.scan_iter(match="test:*")})
    # the latch and its bucket's index entry (the admin's listing); nothing a waiter left
    assert keys == sorted([done._key, done._index_key])
    assert real_target.raw.zscore(done._index_key, done._key) is not None
    assert done.count() == 1
    wait_for(lambda: len(blocked()) <= baseline[0], 10, "the cancelled wait's connection closed")


def test_bad_arguments_are_refused(real_target: RedisTarget) -> None:
    backend = RedisLockBackend("test", real_target.params())
    with pytest.raises(InvalidArgument):
        backend.latch("x", count=-1)
    with pytest.raises(InvalidArgument):
        backend.latch("x", count=1).wait(-1)
    assert backend.latch("zero", count=0).wait(0) is True
