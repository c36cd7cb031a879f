"""The fair lock: arrival order across processes and threads, dead and cancelled waiters,
no overlap, resends, fencing and the watchdog (real server and real cluster).

Order is made deterministic by the test: each waiter is started only once the one before
it is queued (``waiting()`` says so). Deadlines are generous; nothing asserts a duration.
A behaviour that a wait-lease lapse could also explain is checked with a lease far longer
than the test's own deadline.
"""

from __future__ import annotations

import asyncio
import signal
import threading
from typing import Any

import pytest

from django_redislock.backends.redis import RedisLockBackend
from django_redislock.exceptions import InvalidArgument
from django_redislock.locking.fair import FairLock

from .conftest import RedisTarget
from .fair_worker import finish, start
from .processes import wait_for


@pytest.fixture(params=["single", "cluster"])
def real_target(request: pytest.FixtureRequest) -> RedisTarget:
    target: RedisTarget = request.getfixturevalue(f"{request.param}_target")
    return target


def backend(target: RedisTarget) -> RedisLockBackend:
    """A lock backend with the workers' key prefix (``tests.lock_worker.backend_of``)."""
    return RedisLockBackend("test", {**target.params(), "KEY_PREFIX": "test"})


def fair(target: RedisTarget, name: str = "fair", **kwargs: Any) -> FairLock:
    kwargs.setdefault("ttl", 10)
    return backend(target).fair_lock(name, **kwargs)


def order_of(target: RedisTarget, key: str = "{c}:order") -> list[int]:
    return [int(item) for item in target.raw.lrange(key, 0, -1)]


#: Live waiters get a long lease: on a loaded machine a 2 s lease could lapse in a stall and
#: send a live waiter to the back, which is the documented behaviour but not this test's.
WORKER = {"name": "fair", "order": "{c}:order", "inside": "{c}:in", "lease": 10.0}


def queued(lock: FairLock, n: int) -> None:
    wait_for(lambda: lock.waiting() == n, 60, f"{n} queued waiters")


async def queued_async(lock: FairLock, n: int) -> None:
    for _ in range(6000):  # 60 s at most
        if await lock.locked_async() and await asyncio.to_thread(lock.waiting) == n:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"{n} waiters were not queued within 60 s")


def test_waiters_across_processes_are_granted_in_arrival_order(real_target: RedisTarget) -> None:
    holder = fair(real_target, ttl=300)  # outlives any queueing on a loaded machine
    assert holder.acquire()
    first_fence = holder.fence
    workers = []
    for i in range(4):
        workers.append(start("fair", real_target, **WORKER, id=i, hold=0.05))
        queued(holder, i + 1)
    holder.release()
    results = [finish(worker) for worker in workers]
    assert order_of(real_target) == [0, 1, 2, 3]
    assert [r["overlap"] for r in results] == [False] * 4
    fences = [r["fence"] for r in results]
    assert fences == sorted(fences) and fences[0] > first_fence
    assert holder.waiting() == 0 and not holder.locked()


def test_a_killed_waiter_never_blocks_the_queue(real_target: RedisTarget) -> None:
    holder = fair(real_target, ttl=300)  # outlives any queueing on a loaded machine
    assert holder.acquire()
    first = start("fair", real_target, **WORKER, id=0)
    queued(holder, 1)
    doomed = start("fair", real_target, **{**WORKER, "lease": 0.5}, id=1)
    queued(holder, 2)
    last = start("fair", real_target, **WORKER, id=2)
    queued(holder, 3)
    doomed.send_signal(signal.SIGKILL)
    doomed.wait(timeout=30)
    holder.release()
    assert [finish(first)["overlap"], finish(last)["overlap"]] == [False, False]
    assert order_of(real_target) == [0, 2]
    wait_for(lambda: holder.waiting() == 0, 30, "the dead waiter dropped")


def test_a_killed_waiter_at_the_head_is_skipped_after_its_lease(real_target: RedisTarget) -> None:
    holder = fair(real_target, ttl=300)  # outlives any queueing on a loaded machine
    assert holder.acquire()
    doomed = start("fair", real_target, **{**WORKER, "lease": 0.5}, id=0)
    queued(holder, 1)
    live = start("fair", real_target, **WORKER, id=1)
    queued(holder, 2)
    doomed.send_signal(signal.SIGKILL)
    doomed.wait(timeout=30)
    holder.release()  # wakes the dead head: nobody answers, its lease lapses
    assert finish(live)["overlap"] is False
    assert order_of(real_target) == [1]


def test_threads_are_granted_in_arrival_order_and_never_overlap(real_target: RedisTarget) -> None:
    holder = fair(real_target, ttl=300)  # outlives any queueing on a loaded machine
    assert holder.acquire()
    order: list[int] = []
    inside: list[int] = []
    overlaps: list[int] = []

    def waiter(i: int) -> None:
        lock = fair(real_target, timeout=30, wait_lease=10)
        assert lock.acquire()
        inside.append(i)
        if len(inside) != 1:
            overlaps.append(i)
        order.append(i)
        inside.remove(i)
        lock.release()

    threads = [threading.Thread(target=waiter, args=(i,)) for i in range(6)]
    for i, thread in enumerate(threads):
        thread.start()
        queued(holder, i + 1)
    holder.release()
    for thread in threads:
        thread.join(timeout=60)
    assert order == list(range(6)) and overlaps == []


def test_a_waiter_that_times_out_leaves_the_queue_at_once(real_target: RedisTarget) -> None:
    holder = fair(real_target, ttl=300, wait_lease=600)
    assert holder.acquire()
    outcome: list[bool] = []
    impatient = threading.Thread(
        target=lambda: outcome.append(fair(real_target, wait_lease=600).acquire(timeout=0.3))
    )
    impatient.start()
    impatient.join(timeout=30)
    assert outcome == [False]
    assert holder.waiting() == 0  # removed by its own call, not by its (10 min) lease
    got: list[bool] = []

    def patient() -> None:
        lock = fair(real_target, wait_lease=600)
        got.append(lock.acquire(timeout=30))
        lock.release()

    thread = threading.Thread(target=patient)
    thread.start()
    queued(holder, 1)
    holder.release()
    thread.join(timeout=60)
    assert got == [True]


def test_a_cancelled_asyncio_waiter_leaves_the_queue_at_once(real_target: RedisTarget) -> None:
    async def scenario() -> list[str]:
        holder = fair(real_target, ttl=300, wait_lease=600)
        assert await holder.acquire_async()
        first = fair(real_target, wait_lease=600, timeout=30)
        task = asyncio.ensure_future(first.acquire_async())
        await queued_async(holder, 1)
        second = fair(real_target, wait_lease=600, timeout=30)

        async def take_and_release() -> bool:
            granted = await second.acquire_async()
            await second.release_async()
            return granted

        waiting = asyncio.ensure_future(take_and_release())
        await queued_async(holder, 2)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        left = [m.decode() for m in real_target.raw.zrange(holder._queue_key, 0, -1)]
        await holder.release_async()  # the cancelled head is gone: the second is woken
        assert await asyncio.wait_for(waiting, 30) is True
        assert not first.held_by_me()
        return left

    left = asyncio.run(scenario())
    assert len(left) == 1  # only the second waiter was still queued after the cancel


def test_a_resent_acquire_is_granted_once_and_a_resent_release_is_a_no_op(
    real_target: RedisTarget,
) -> None:
    lock = fair(real_target)
    call = lock._attempt("token-1", "{}", True, 5.0)
    first, again = lock._call(call), lock._call(call)
    assert int(first[0]) == 1 and [int(x) for x in again] == [int(x) for x in first]
    fence = int(first[1])
    release = ("fair_release", lock._release_keys, ["token-1", fence])
    assert int(lock._call(release)[0]) == 1
    assert int(lock._call(release)[0]) == 2  # resent: already done
    assert int(lock._call(call)[0]) == 0  # a late resend of the acquire grants nothing
    assert not lock.locked()


def test_a_taken_back_acquire_that_arrives_late_grants_nothing(real_target: RedisTarget) -> None:
    lock = fair(real_target)
    assert int(lock._call(lock._abandon_call("token-2"))[0]) == 1
    assert [int(x) for x in lock._call(lock._attempt("token-2", "{}", True, 5.0))] == [0, 0, 0]
    assert not lock.locked() and lock.waiting() == 0


def test_a_crashed_queued_waiter_is_skipped_once_its_lease_lapses(
    real_target: RedisTarget,
) -> None:
    lock = fair(real_target, wait_lease=5)
    # a waiter queued by a process that then died: it never tries again
    ghost = lock._attempt("ghost", "{}", True, 5.0)
    holder = fair(real_target, ttl=300)  # outlives any queueing on a loaded machine
    assert holder.acquire()
    assert [int(x) for x in lock._call(ghost)][2] == 1
    holder.release()
    assert not fair(real_target).acquire(blocking=False)  # the ghost's turn, still leased
    assert fair(real_target, wait_lease=1).acquire(timeout=30)  # granted once it lapsed


def test_a_waiter_with_a_short_lease_never_shortens_a_longer_waiters_queue(
    real_target: RedisTarget,
) -> None:
    """The queue and lease zsets outlive the longest live lease: each waiting try set their
    TTL to its own lease + 1 s, so a waiter with a 0.5 s lease queued behind one with a 600 s
    lease cut both keys to 1.5 s, and the long waiter's place vanished with them."""
    holder = fair(real_target, ttl=300)
    assert holder.acquire()
    long_wait = fair(real_target, wait_lease=600)
    short_wait = fair(real_target, wait_lease=0.5)
    assert [int(x) for x in long_wait._call(long_wait._attempt("long", "{}", True, 600.0))][2] == 1
    assert [int(x) for x in short_wait._call(short_wait._attempt("short", "{}", True, 0.5))][2] == 2
    for key in (long_wait._queue_key, long_wait._lease_key):
        # not 1,500 ms; 600 s less the time since the try (seconds on a loaded machine)
        assert real_target.raw.pttl(key) > 500_000
    holder.release()


def test_fences_increase_and_the_watchdog_renews(real_target: RedisTarget) -> None:
    # renewals every third of the 1 s TTL: a renewal may come up to 2/3 s late on a
    # loaded machine (with 0.3 s, 0.2 s late lost the hold at load average 20)
    lock = fair(real_target, ttl=1.0, watchdog=True)
    with lock:
        first = lock.fence
        wait_for(lambda: real_target.raw.pttl(lock._key) > 0, 5, "held")
        threading.Event().wait(1.5)  # past the TTL: only the watchdog keeps it
        assert lock.owned()
    with lock:
        assert lock.fence > first


def test_async_context_manager_and_non_blocking_try(real_target: RedisTarget) -> None:
    async def scenario() -> None:
        async with fair(real_target) as lock:
            assert await lock.locked_async()
            assert not await fair(real_target).acquire_async(blocking=False)
        assert not await lock.locked_async()

    asyncio.run(scenario())


def test_bad_arguments_name_the_argument(real_target: RedisTarget) -> None:
    with pytest.raises(InvalidArgument, match="wait_lease"):
        fair(real_target, wait_lease=0)
    with pytest.raises(InvalidArgument, match="ttl"):
        fair(real_target, ttl=-1)


@pytest.mark.parametrize(
    "held",
    [pytest.param(True, id="lock-held"), pytest.param(False, id="lock-free")],
)
def test_cancelled_at_any_point_leaves_nothing_behind(real_target: RedisTarget, held: bool) -> None:
    """A waiting or granting acquire_async cancelled after 0..24 loop turns (its client
    already connected): afterwards the queue is empty and the lock is held by the holder
    (or nobody), never by the cancelled call."""

    async def one(turns: int) -> None:
        holder = fair(real_target, ttl=300, wait_lease=600)
        lock = fair(real_target, ttl=300, wait_lease=600, timeout=30)
        assert not await lock.locked_async()  # connected: the sweep is of the acquire's awaits
        if held:
            assert await holder.acquire_async()

        async def attempt() -> bool:
            granted = await lock.acquire_async()
            if granted:
                await lock.release_async()
            return granted

        task = asyncio.ensure_future(attempt())
        for _ in range(turns):
            await asyncio.sleep(0)
        task.cancel()
        done, _ = await asyncio.wait({task}, timeout=10)
        assert done, f"the cancellation after {turns} turns did not end the acquire"
        granted = not task.cancelled() and task.result()
        raw = real_target.raw
        assert raw.zcard(lock._queue_key) == 0, f"left queued after {turns} turns"
        owner = raw.hget(lock._key, "o")
        if held:
            assert not granted
            assert holder._hold is not None and owner == holder._hold.owner.encode()
            await holder.release_async()
        else:
            assert owner is None, f"a cancelled call's grant was left after {turns} turns"

    async def sweep() -> None:
        for turns in range(25):
            await one(turns)

    asyncio.run(sweep())
