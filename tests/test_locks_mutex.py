"""The mutex on fakeredis, a real server and a real cluster: grants, fences, release, bad input."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from django_redislock import signals
from django_redislock.exceptions import (
    InvalidArgument,
    LockLost,
    LockNotAcquired,
    LockNotOwned,
    LockUsageError,
)
from django_redislock.locking import Lock
from django_redislock.locking.keys import lock_key

from .conftest import RedisTarget, reached


def snapshot(target: RedisTarget) -> dict[bytes, Any]:
    """Every key with its value dump, to prove that nothing was written."""
    return {key: target.raw.dump(key) for key in target.raw.scan_iter(count=1000)}


def test_acquire_release_and_fences_increase(redis_target: RedisTarget) -> None:
    backend = redis_target.lock_backend()
    fences = []
    for _ in range(3):
        lock = backend.lock("order:42", ttl=5)
        assert lock.acquire(blocking=False)
        assert lock.locked() and lock.owned()
        fences.append(lock.fence)
        lock.release()
        assert not lock.locked() and not lock.owned()
    assert fences == sorted(set(fences)) and fences[0] >= 1


def test_second_holder_is_refused_then_times_out(redis_target: RedisTarget) -> None:
    backend = redis_target.lock_backend()
    with backend.lock("a", ttl=5):
        other = backend.lock("a", ttl=5)
        assert other.acquire(blocking=False) is False
        start = time.monotonic()
        assert other.acquire(timeout=0.2) is False
        # it waited its timeout, and gave up before the hold's 5 s ttl would have let it in
        assert 0.15 < time.monotonic() - start < 5.0
        with pytest.raises(LockNotAcquired) as info, backend.lock("a", timeout=0):
            pass
        assert info.value.name == "a"


def test_ttl_always_applies(redis_target: RedisTarget) -> None:
    backend = redis_target.lock_backend(DEFAULT_TTL=17.0)
    lock = backend.lock("x", watchdog=False)
    lock.acquire()
    pttl = redis_target.raw.pttl(lock_key(backend, "x", "l"))
    assert 13000 < pttl <= 17000  # DEFAULT_TTL, with slack for a stall of a loaded machine
    lock.release()


def test_expired_holder_cannot_release_the_new_hold(redis_target: RedisTarget) -> None:
    backend = redis_target.lock_backend()
    lost: list[dict[str, Any]] = []

    def receiver(**kwargs: Any) -> None:
        lost.append(kwargs)

    signals.lock_lost.connect(receiver)
    try:
        first = backend.lock("job", ttl=0.2)
        first.acquire()
        second = backend.lock("job", ttl=5)
        assert second.acquire(timeout=3)
        assert second.fence > first.fence
        with pytest.raises(LockLost):
            first.ensure_held()
        assert second.owned()
        with pytest.raises(LockLost):
            first.release()  # the object already knows it lost the hold, and says so again
        with pytest.raises(LockNotOwned):
            first.release()
        assert second.owned()
        second.release()
    finally:
        signals.lock_lost.disconnect(receiver)
    assert [(e["alias"], e["name"]) for e in lost] == [("test", "job")]


def test_release_after_loss_raises_lock_lost_and_leaves_new_hold(redis_target: RedisTarget) -> None:
    backend = redis_target.lock_backend()
    first = backend.lock("job", ttl=0.15)
    first.acquire()
    time.sleep(0.3)
    second = backend.lock("job", ttl=5)
    assert second.acquire(blocking=False)
    with pytest.raises(LockLost):
        first.release()
    assert second.owned()
    second.release()


def test_retried_release_is_a_no_op_success(redis_target: RedisTarget) -> None:
    backend = redis_target.lock_backend()
    first = backend.lock("pay", ttl=5)
    first.acquire()
    hold = first._hold
    assert hold is not None
    script, keys, args = first._release_call(hold)
    assert [int(x) for x in backend.script(script)(keys=keys, args=args)][:2] == [1, 0]
    second = backend.lock("pay", ttl=5)
    assert second.acquire(blocking=False)
    # The same release reaches Redis again (a retry after a lost reply).
    assert [int(x) for x in backend.script(script)(keys=keys, args=args)] == [2, 0]
    assert second.owned()
    # And through the API: the object then sees a successful release.
    first.release()
    assert second.owned()
    second.release()


def test_extend_and_ensure_held(redis_target: RedisTarget) -> None:
    backend = redis_target.lock_backend()
    lock = backend.lock("e", ttl=2.0)  # must last until extend(), even on a loaded machine
    lock.acquire()
    lock.extend(20)
    assert redis_target.raw.pttl(lock_key(backend, "e", "l")) > 15000
    lock.ensure_held()
    time.sleep(2.1)  # past the original TTL
    lock.ensure_held()
    lock.release()
    with pytest.raises(LockNotOwned):
        lock.extend()


def test_force_release_bumps_the_fence_and_the_holder_learns(redis_target: RedisTarget) -> None:
    backend = redis_target.lock_backend()
    lock = backend.lock("stuck", ttl=30)
    lock.acquire()
    old_fence = lock.fence
    assert backend.force_release("stuck") is True
    assert backend.force_release("stuck") is False
    with pytest.raises(LockLost):
        lock.ensure_held()
    again = backend.lock("stuck", ttl=5)
    again.acquire()
    assert again.fence >= old_fence + 2
    again.release()


def test_force_release_with_a_fence_ends_only_that_hold(redis_target: RedisTarget) -> None:
    backend = redis_target.lock_backend()
    first = backend.lock("guarded", ttl=0.2)
    first.acquire()
    seen = first.fence
    time.sleep(0.3)  # the hold the operator looked at expires; another one begins
    second = backend.lock("guarded", ttl=5)
    second.acquire()
    assert backend.force_release("guarded", fence=seen) is False
    assert second.owned()
    assert backend.force_release("guarded", fence=second.fence) is True
    assert not second.locked()


def test_fence_stays_readable_once_the_hold_is_lost(redis_target: RedisTarget) -> None:
    backend = redis_target.lock_backend()
    lock = backend.lock("lost-fence", ttl=5)
    with pytest.raises(LockNotOwned):
        _ = lock.fence
    lock.acquire()
    fence = lock.fence
    backend.force_release("lost-fence")
    with pytest.raises(LockLost):
        lock.ensure_held()
    assert lock.fence == fence  # a fenced write made with it is refused, as it should be
    with pytest.raises(LockLost):
        lock.release()
    assert lock.fence == fence  # still readable once release() told the loss, to log it
    with pytest.raises(LockNotOwned):
        lock.release()  # the loss is told once
    # A loss found by release() itself (no earlier check) leaves the fence readable too.
    lock.acquire()
    second = lock.fence
    backend.force_release("lost-fence")
    with pytest.raises(LockLost):
        lock.release()
    assert lock.fence == second > fence


def test_signals_carry_alias_name_and_fence(redis_target: RedisTarget) -> None:
    backend = redis_target.lock_backend()
    seen: list[tuple[str, str, str, int]] = []

    def on(signal_name: str) -> Any:
        def receiver(**kwargs: Any) -> None:
            seen.append((signal_name, kwargs["alias"], kwargs["name"], kwargs["fence"]))

        return receiver

    acquired, released = on("acquired"), on("released")
    signals.lock_acquired.connect(acquired)
    signals.lock_released.connect(released)
    try:
        with backend.lock("s", ttl=5) as lock:
            fence = lock.fence
    finally:
        signals.lock_acquired.disconnect(acquired)
        signals.lock_released.disconnect(released)
    assert seen == [("acquired", "test", "s", fence), ("released", "test", "s", fence)]


@pytest.mark.parametrize(
    ("kwargs", "argument"),
    [
        ({"name": ""}, "name"),
        ({"name": "   "}, "name"),
        ({"name": 42}, "name"),
        ({"name": None}, "name"),
        ({"name": "a{b}"}, "name"),
        ({"name": "a\nb"}, "name"),
        ({"name": "x" * 600}, "name"),
        ({"name": "ok", "ttl": 0}, "ttl"),
        ({"name": "ok", "ttl": -1}, "ttl"),
        ({"name": "ok", "ttl": 10**9}, "ttl"),
        ({"name": "ok", "ttl": float("nan")}, "ttl"),
        ({"name": "ok", "ttl": "10"}, "ttl"),
        ({"name": "ok", "timeout": -1}, "timeout"),
        ({"name": "ok", "owner": ""}, "owner"),
        ({"name": "ok", "blocking": "yes"}, "blocking"),
    ],
)
def test_bad_arguments_name_the_argument_and_write_nothing(
    redis_target: RedisTarget, kwargs: dict[str, Any], argument: str
) -> None:
    backend = redis_target.lock_backend()
    with backend.lock("other", ttl=5):
        before = snapshot(redis_target)
        with pytest.raises(InvalidArgument, match=argument):
            backend.lock(**kwargs).acquire()
        assert snapshot(redis_target) == before


def test_bad_acquire_and_extend_arguments(redis_target: RedisTarget) -> None:
    backend = redis_target.lock_backend()
    lock = backend.lock("ok", ttl=5)
    with pytest.raises(InvalidArgument, match="timeout"):
        lock.acquire(timeout=-0.5)
    with lock:
        before = snapshot(redis_target)
        with pytest.raises(InvalidArgument, match="ttl"):
            lock.extend(ttl=-3)
        with pytest.raises(ValueError, match="ttl"):
            lock.extend(ttl=10**8)
        assert snapshot(redis_target) == before


def test_release_never_acquired_raises_not_owned(redis_target: RedisTarget) -> None:
    backend = redis_target.lock_backend()
    before = snapshot(redis_target)
    with pytest.raises(LockNotOwned):
        backend.lock("never", ttl=5).release()
    with pytest.raises(LockNotOwned):
        _ = backend.lock("never", ttl=5).fence
    assert snapshot(redis_target) == before


def test_a_lock_object_shared_between_threads_is_refused(redis_target: RedisTarget) -> None:
    backend = redis_target.lock_backend()
    lock = backend.lock("shared", ttl=5)
    lock.acquire()
    errors: list[BaseException] = []

    def other_thread() -> None:
        for action in (lock.release, lock.acquire, lock.extend):
            try:
                action()
            except LockUsageError as exc:
                errors.append(exc)

    thread = threading.Thread(target=other_thread)
    thread.start()
    thread.join(10)
    assert len(errors) == 3 and "thread" in str(errors[0])
    with pytest.raises(LockUsageError, match="already held"):
        lock.acquire()
    assert lock.owned()
    lock.release()


def test_async_paths(redis_target: RedisTarget) -> None:
    backend = redis_target.lock_backend()

    async def main() -> tuple[int, bool, bool]:
        lock = backend.lock("async", ttl=5)
        async with lock:
            fence = lock.fence
            assert await lock.owned_async()
            await lock.extend_async(5)
            await lock.ensure_held_async()
            other = backend.lock("async", ttl=5)
            refused = await other.acquire_async(timeout=0.05)
            assert await lock.locked_async()
        waiter = backend.lock("async", ttl=5)
        taken = asyncio.Event()

        async def hold_briefly() -> None:
            async with backend.lock("async", ttl=5):
                taken.set()
                await asyncio.sleep(0.1)

        task = asyncio.create_task(hold_briefly())
        await reached(taken, task)
        granted = await waiter.acquire_async(timeout=5)
        await task
        await waiter.release_async()
        return fence, refused, granted

    fence, refused, granted = asyncio.run(main())
    assert fence >= 1 and refused is False and granted is True


def test_lock_repr_and_backend_flags(redis_target: RedisTarget) -> None:
    backend = redis_target.lock_backend()
    lock = backend.lock("r", ttl=5)
    assert isinstance(lock, Lock) and "not held" in repr(lock)
    assert backend.supports_listing
