"""Reentrant and read-write locks on fakeredis, a real server and a real cluster."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from django_redislock.exceptions import InvalidArgument, LockLost, LockNotOwned

from .conftest import RedisTarget


def test_reentrant_counts_per_owner(redis_target: RedisTarget) -> None:
    backend = redis_target.lock_backend()
    lock = backend.lock("re", ttl=5, reentrant=True)
    with lock:
        fence = lock.fence
        with lock:
            assert lock.count == 2 and lock.fence == fence
            inner = backend.lock("re", ttl=5, reentrant=True)  # same thread, another object
            assert inner.acquire(blocking=False) and inner.fence == fence
            [held] = backend.held_locks()
            assert (held.kind, held.count, held.fence) == ("reentrant", 3, fence)
            inner.release()
        assert lock.count == 1 and lock.locked()
    assert not lock.locked()


def test_reentrant_lock_excludes_other_threads(redis_target: RedisTarget) -> None:
    backend = redis_target.lock_backend()
    results: list[bool] = []
    with backend.lock("re", ttl=5, reentrant=True):
        thread = threading.Thread(
            target=lambda: results.append(
                backend.lock("re", ttl=5, reentrant=True).acquire(blocking=False)
            )
        )
        thread.start()
        thread.join(10)
    assert results == [False]


def test_explicit_owner_releases_from_elsewhere(redis_target: RedisTarget) -> None:
    backend = redis_target.lock_backend()
    taken = backend.lock("celery", ttl=5, reentrant=True, owner="task-7f3a")
    taken.acquire()
    taken.acquire()
    # Another process (here: a fresh object) that knows only the owner id releases both holds.
    other = backend.lock("celery", ttl=5, reentrant=True, owner="task-7f3a")
    other.release()
    assert other.locked()
    other.release()
    assert not other.locked()
    with pytest.raises(LockNotOwned):
        other.release()
    with pytest.raises(LockLost):
        taken.ensure_held()


def test_resent_partial_reentrant_release_decrements_once(redis_target: RedisTarget) -> None:
    backend = redis_target.lock_backend()
    lock = backend.lock("re-retry", ttl=5, reentrant=True)
    lock.acquire()
    lock.acquire()
    hold = lock._hold
    assert hold is not None
    script, keys, args = lock._release_call(hold)
    run = backend.script(script)
    assert [int(x) for x in run(keys=keys, args=args)] == [1, 1, hold.fence]
    # The same step reaches Redis again (a retry after a lost reply): no second decrement.
    assert [int(x) for x in run(keys=keys, args=args)] == [2, 0]
    [held] = backend.held_locks()
    assert (held.name, held.count) == ("re-retry", 1)
    # A new step has its own id, so it does decrement; resending that one is a no-op too.
    script, keys, args = lock._release_call(hold)
    assert [int(x) for x in run(keys=keys, args=args)][:2] == [1, 0]
    assert [int(x) for x in run(keys=keys, args=args)] == [2, 0]
    assert not lock.locked()


def test_resent_release_by_owner_is_a_no_op(redis_target: RedisTarget) -> None:
    backend = redis_target.lock_backend()
    backend.lock("by-owner", ttl=5, owner="task-1").acquire()
    other = backend.lock("by-owner", ttl=5, owner="task-1")
    call = other._foreign_release()
    assert call is not None
    script, keys, args = call
    run = backend.script(script)
    assert int(run(keys=keys, args=args)[0]) == 1
    again = backend.lock("by-owner", ttl=5, owner="task-1")
    assert again.acquire(blocking=False)
    assert [int(x) for x in run(keys=keys, args=args)] == [2, 0]  # the new hold is untouched
    assert again.owned()
    again.release()


def test_readers_share_writers_exclude(redis_target: RedisTarget) -> None:
    backend = redis_target.lock_backend()
    rw = backend.read_write_lock("doc", ttl=5)
    first, second = rw.read(), rw.read()
    assert first.acquire(blocking=False) and second.acquire(blocking=False)
    assert first.fence != second.fence
    assert rw.state()["readers"] == 2
    assert rw.write().acquire(timeout=0) is False
    first.release()
    second.release()
    writer = rw.write()
    assert writer.acquire(blocking=False)
    assert rw.read().acquire(blocking=False) is False
    assert rw.write().acquire(blocking=False) is False
    writer.release()
    assert rw.state() == {"writer": False, "readers": 0, "writer_waiting": False}


def _left_ms(lock: Any) -> int:
    """The hold's remaining time as the extend script's check-only call reads it."""
    script, keys, args = lock._extend_call(lock._hold, 0)
    return int(lock.backend.script(script)(keys=keys, args=args))


@pytest.mark.parametrize("mode", ["read", "write"])
def test_a_read_write_extend_never_shortens_the_hold(redis_target: RedisTarget, mode: str) -> None:
    """``extend(short)`` keeps a longer deadline, as the mutex's does (issue 23, Build 2).

    The reader's deadline and the writer's TTL used to be set to now + ttl outright, so an
    extend (or a watchdog renewal) with a shorter ttl than the hold had ended it early.
    """
    backend = redis_target.lock_backend()
    lock = getattr(backend.read_write_lock("doc-x", ttl=20), mode)()
    lock.acquire()
    lock.extend(1)
    assert _left_ms(lock) > 10_000
    lock.extend(30)
    assert _left_ms(lock) > 20_000  # a longer ttl still moves it later
    lock.release()
    assert lock.parent.state() == {"writer": False, "readers": 0, "writer_waiting": False}


def test_one_reader_cannot_release_another(redis_target: RedisTarget) -> None:
    """Seed 004's cluster lock kept one `read` field; here every reader is its own entry."""
    backend = redis_target.lock_backend()
    rw = backend.read_write_lock("doc", ttl=5)
    a, b = rw.read(), rw.read()
    a.acquire()
    b.acquire()
    a.release()
    assert rw.state()["readers"] == 1
    b.ensure_held()
    assert rw.write().acquire(blocking=False) is False
    b.release()


def test_read_holds_given_the_same_owner_stay_two_holds(redis_target: RedisTarget) -> None:
    backend = redis_target.lock_backend()
    rw = backend.read_write_lock("doc", ttl=5, owner="nightly-report")
    first, second = rw.read(), rw.read()
    first.acquire()
    second.acquire()
    assert rw.state()["readers"] == 2
    first.release()
    second.ensure_held()  # the first release ended only its own hold
    assert rw.state()["readers"] == 1
    second.release()
    assert rw.write().acquire(blocking=False) is True


def test_readers_expire_individually(redis_target: RedisTarget) -> None:
    backend = redis_target.lock_backend()
    rw = backend.read_write_lock("doc")
    short, long = rw.read(ttl=0.2), rw.read(ttl=5)
    short.acquire()
    long.acquire()
    time.sleep(0.35)
    with pytest.raises(LockLost):
        short.ensure_held()
    long.ensure_held()
    assert rw.write(ttl=5).acquire(blocking=False) is False
    long.release()
    assert rw.write(ttl=5).acquire(blocking=False) is True


def test_waiting_writer_blocks_new_readers(redis_target: RedisTarget) -> None:
    """Writer preference: once a writer waits, new readers wait behind it."""
    backend = redis_target.lock_backend()
    rw = backend.read_write_lock("doc", ttl=5)
    reader = rw.read()
    reader.acquire()
    order: list[str] = []
    writer_done = threading.Event()

    def writer() -> None:
        with rw.write(timeout=30):
            order.append("writer")
        writer_done.set()

    thread = threading.Thread(target=writer)
    thread.start()
    deadline = time.monotonic() + 30  # generous: a loaded machine may start it late
    while not rw.state()["writer_waiting"] and time.monotonic() < deadline:
        time.sleep(0.01)
    assert rw.state()["writer_waiting"]
    late = rw.read()
    assert late.acquire(blocking=False) is False  # refused while the writer waits
    reader.release()
    assert writer_done.wait(30)
    with rw.read():
        order.append("late reader")
    thread.join(5)
    assert order == ["writer", "late reader"]


def test_writer_that_gives_up_stops_blocking_readers(redis_target: RedisTarget) -> None:
    backend = redis_target.lock_backend()
    rw = backend.read_write_lock("doc", ttl=5)
    with rw.read():
        assert rw.write().acquire(timeout=0.1) is False
        start = time.monotonic()
        with rw.read(timeout=10):
            # The intent outlives the writer's 0.1 s wait by 50 ms at most; had it stayed for
            # the lock's 5 s ttl, this reader would have waited that long.
            assert time.monotonic() - start < 4.5


def test_downgrade_keeps_others_out_then_admits_readers(redis_target: RedisTarget) -> None:
    backend = redis_target.lock_backend()
    rw = backend.read_write_lock("doc", ttl=5)
    writer = rw.write()
    writer.acquire()
    fence = writer.fence
    reader = writer.downgrade()
    assert reader.fence == fence and not writer.held_by_me()
    assert rw.state() == {"writer": False, "readers": 1, "writer_waiting": False}
    assert rw.write().acquire(blocking=False) is False
    other = rw.read()
    assert other.acquire(blocking=False)
    other.release()
    reader.release()
    with pytest.raises(LockNotOwned):
        writer.release()


def test_retried_read_release_is_a_no_op(redis_target: RedisTarget) -> None:
    backend = redis_target.lock_backend()
    rw = backend.read_write_lock("doc", ttl=5)
    reader = rw.read()
    reader.acquire()
    other = rw.read()
    other.acquire()
    hold = reader._hold
    assert hold is not None
    script, keys, args = reader._release_call(hold)
    assert int(backend.script(script)(keys=keys, args=args)[0]) == 1
    assert int(backend.script(script)(keys=keys, args=args)[0]) == 2
    assert rw.state()["readers"] == 1
    other.release()


def test_read_write_bad_input(redis_target: RedisTarget) -> None:
    backend = redis_target.lock_backend()
    with pytest.raises(InvalidArgument, match="name"):
        backend.read_write_lock("")
    with pytest.raises(InvalidArgument, match="ttl"):
        backend.read_write_lock("doc", ttl=-1)
    with pytest.raises(InvalidArgument, match="unknown"):
        backend.read_write_lock("doc", reentrant=True)
    assert redis_target.raw.dbsize() == 0


def test_async_read_write_and_reentrant(redis_target: RedisTarget) -> None:
    import asyncio

    backend = redis_target.lock_backend()
    rw = backend.read_write_lock("doc", ttl=5)

    async def main() -> list[int]:
        async with rw.read() as a, rw.read() as b:
            assert await a.locked_async()
            assert await rw.write().acquire_async(timeout=0.05) is False
            await b.ensure_held_async()
        writer = rw.write()
        assert await writer.acquire_async(timeout=5)  # after the refused writer's intent
        reader = await writer.downgrade_async()
        await reader.release_async()
        lock = backend.lock("re", ttl=5, reentrant=True)
        async with lock, lock:
            counts = [lock.count]

            async def other_task() -> bool:
                # Another asyncio task is another owner: it must wait.
                return await backend.lock("re", ttl=5, reentrant=True).acquire_async(timeout=0)

            counts.append(int(await asyncio.create_task(other_task())))
        return counts

    assert asyncio.run(main()) == [2, 0]
    assert rw.state() == {"writer": False, "readers": 0, "writer_waiting": False}
