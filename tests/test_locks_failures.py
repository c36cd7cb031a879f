"""Locks when calls fail: lost replies, lost requests, resends, cancellations, expiries.

Faults are made on real servers, without a mock of Redis:

* a *lost request*: ``CLIENT PAUSE ... WRITE`` holds the call on the server past the
  client's ``SOCKET_TIMEOUT``; the client gives up and closes its connection, and the
  paused call is dropped with it, never applied;
* a *lost reply*: a busy script stalls the server past the client's timeout; the
  client gives up, but the server applies the call once it is free;
* a *resend*: the same script call sent twice, as a client with retries does after a
  lost reply.

A call that must end resolved after a lost reply (a release, a downgrade: the library resends
them) loses its reply in the fault proxy instead (``tests/faults.py``): the request reaches
Redis, its reply does not come back, and the resend goes out at once on a new connection. A
busy script would have to end before the library's last resend gives up, a race between two
durations that a loaded machine lost (the last resend's reconnect timed out at the end of the
stall and ``release()`` raised).
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Literal

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from django_redislock import signals
from django_redislock.exceptions import ConnectionFailed, LockLost, LockNotOwned
from django_redislock.locking import watchdog
from django_redislock.locking.keys import lock_key

from .conftest import RedisTarget, reached
from .faults import contains
from .proxied import RESOLVE_SOCKET_TIMEOUT, ProxiedTarget, no_resend_options

#: A script that keeps the server busy for ARGV[1] ms (other clients wait meanwhile).
BUSY = (
    "local t = redis.call('TIME') local s = t[1] * 1000 + t[2] / 1000 "
    "while true do local u = redis.call('TIME') "
    "if u[1] * 1000 + u[2] / 1000 - s > tonumber(ARGV[1]) then break end end return 1"
)


def real_only(target: RedisTarget) -> None:
    if target.kind == "fakeredis":
        pytest.skip("a fakeredis server cannot be paused or stalled")


def no_retry_backend(target: RedisTarget, timeout: float = 0.2, **options: Any) -> Any:
    """A backend whose calls time out after ``timeout`` s and are not resent by redis-py."""
    kwargs = {"retry": Retry(NoBackoff(), 0)}
    return target.lock_backend(SOCKET_TIMEOUT=timeout, CLIENT_KWARGS=kwargs, **options)


def node_of(target: RedisTarget, key: str) -> redis.Redis:
    """A plain client of the server that owns ``key``."""
    if target.kind == "cluster":
        node = target.raw.get_node_from_key(key)
        return redis.Redis(host=node.host, port=node.port)
    client: redis.Redis = target.raw
    return client


def pause_writes(target: RedisTarget, key: str, ms: int) -> None:
    """Hold every write on ``key``'s server for ``ms``: a call given up meanwhile is lost."""
    node_of(target, key).execute_command("CLIENT", "PAUSE", ms, "WRITE")


@contextmanager
def stalled(target: RedisTarget, key: str, ms: int) -> Iterator[None]:
    """Keep ``key``'s server busy for ``ms``: calls given up meanwhile are applied after."""
    client = node_of(target, key)
    kwargs = client.connection_pool.connection_kwargs
    probe = redis.Redis(
        host=kwargs["host"], port=kwargs["port"], socket_timeout=0.01, retry=Retry(NoBackoff(), 0)
    )
    busy = threading.Thread(target=lambda: client.eval(BUSY, 0, ms))
    busy.start()
    deadline = time.monotonic() + 5.0
    unanswered = 0
    # until the busy script runs: two PINGs in a row get no answer (one can be a test
    # process descheduled for 10 ms on a loaded machine)
    while time.monotonic() < deadline and unanswered < 2:
        try:
            probe.ping()
            unanswered = 0
        except redis.TimeoutError:
            unanswered += 1
            continue
        time.sleep(0.002)
    probe.close()
    try:
        yield
    finally:
        busy.join(10)


def lose_the_reply(
    target: ProxiedTarget, name: str, then: Literal["cut", "silent"], call: Callable[[], Any]
) -> Any:
    """Run ``call()`` with the reply of its first script call on lock ``name`` lost.

    The request reaches Redis and is applied; the connection then goes silent until the
    client's socket timeout (``then="silent"``) or is reset (``"cut"``). Checks that the
    library resent it exactly once, and returns what ``call()`` returned.
    """
    match = contains(name)
    before = target.count(match)
    faults = target.drop_reply(match, then=then)
    try:
        result = call()
    finally:
        target.clear()
    assert any(f.fired.is_set() for f in faults), "the fault never met the call"
    assert target.count(match) == before + 2, "not the lost send and one resend"
    return result


def lost_fences() -> tuple[list[tuple[str, int]], Any]:
    """A list of the (name, fence) of every lock_lost, and the receiver that fills it."""
    fences: list[tuple[str, int]] = []

    def on_lost(*, name: str, fence: int, **kwargs: Any) -> None:
        fences.append((name, fence))

    return fences, on_lost


# -- release ---------------------------------------------------------------------------------


def test_a_failed_release_stops_the_renewal(redis_target: RedisTarget) -> None:
    real_only(redis_target)
    backend = no_retry_backend(redis_target)
    lock = backend.lock("stalled-release", ttl=2.0, watchdog=True)
    assert lock.acquire()
    pause_writes(redis_target, lock_key(backend, "stalled-release", "l"), 1500)
    with pytest.raises(ConnectionFailed):
        lock.release()  # it and its resends are dropped with their connections: never applied
    assert not lock.held_by_me()
    # The hold ends by its TTL: nothing renews a hold its owner tried to release.
    other = redis_target.lock_backend().lock("stalled-release", ttl=5)
    deadline = time.monotonic() + 5.0
    while not other.acquire(blocking=False):
        assert time.monotonic() < deadline, "the released-but-failed hold is still renewed"
        time.sleep(0.1)
    other.release()


def test_a_cancelled_async_release_stops_the_renewal(redis_target: RedisTarget) -> None:
    real_only(redis_target)
    backend = redis_target.lock_backend()
    lock = backend.lock("cancelled-release", ttl=1.0, watchdog=True)
    fences, on_lost = lost_fences()
    signals.lock_lost.connect(on_lost, weak=False)

    async def hold_then_release(started: asyncio.Event) -> None:
        assert await lock.acquire_async()
        started.set()
        await asyncio.sleep(0.2)  # the server is stalled by then
        await lock.release_async()

    async def main() -> None:
        started = asyncio.Event()
        task = asyncio.ensure_future(hold_then_release(started))
        await reached(started, task)
        with stalled(redis_target, lock_key(backend, "cancelled-release", "l"), 400):
            await asyncio.sleep(0.25)  # the release is waiting for its reply
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            # Nothing runs on after the cancel: the object holds nothing, nothing renews it,
            # and the release was completed before the cancellation went on.
            assert not lock.held_by_me() and not _renewed(lock)
            assert not await lock.locked_async()

    try:
        asyncio.run(main())
        other = backend.lock("cancelled-release", ttl=5)
        deadline = time.monotonic() + 5.0
        while not other.acquire(blocking=False):
            assert time.monotonic() < deadline
            time.sleep(0.1)
        other.release()
        time.sleep(0.5)
    finally:
        signals.lock_lost.disconnect(on_lost)
    assert fences == []  # a released hold is not a lost one


def _renewed(lock: Any) -> bool:
    return any(entry is lock for entry in watchdog._locks.values())


@pytest.mark.slow
def test_no_lock_lost_for_released_holds(redis_target: RedisTarget) -> None:
    """10,000 watchdog-on cycles, each held about one renewal period: no spurious loss.

    A renewal that reaches Redis just after the release must not be taken for a loss.
    Holds that really expired (their release raises LockLost) are not counted.
    """
    real_only(redis_target)  # fakeredis runs in this process: too slow for 30 ms holds
    backend = redis_target.lock_backend()
    fences, on_lost = lost_fences()
    signals.lock_lost.connect(on_lost, weak=False)
    released: set[tuple[str, int]] = set()
    really_lost: set[tuple[str, int]] = set()
    threads, cycles = 20, 10_000
    rng = random.Random(7)
    holds = [rng.uniform(0.012, 0.018) for _ in range(cycles)]

    def worker(number: int) -> None:
        name = f"cycles-{number}"
        lock = backend.lock(name, ttl=0.045, watchdog=True)
        for index in range(number, cycles, threads):
            assert lock.acquire(timeout=5)
            fence = (name, lock.fence)
            time.sleep(holds[index])  # about one renewal period (ttl / 3)
            try:
                lock.release()
            except LockLost:
                really_lost.add(fence)
            else:
                released.add(fence)

    try:
        workers = [threading.Thread(target=worker, args=(n,)) for n in range(threads)]
        for thread in workers:
            thread.start()
        for thread in workers:
            thread.join(120)
        time.sleep(0.1)  # renewals still on their way
    finally:
        signals.lock_lost.disconnect(on_lost)
    assert len(released) + len(really_lost) == cycles
    spurious = released & set(fences)
    assert not spurious, f"{len(spurious)} released holds were reported lost"
    # Enough released holds to have raced their renewals: a sample size, not a share (45 ms
    # holds really end on a loaded machine, and that is not what this test is about).
    assert len(released) >= cycles // 5, f"only {len(released)} holds were released"


# -- the fence after a loss ------------------------------------------------------------------


def test_fence_is_readable_after_release_raised_lock_lost(redis_target: RedisTarget) -> None:
    backend = redis_target.lock_backend()
    lock = backend.lock("expired-fence", ttl=0.1, watchdog=False)
    assert lock.acquire()
    fence = lock.fence
    time.sleep(0.3)
    with pytest.raises(LockLost):
        lock.release()
    assert lock.fence == fence
    with pytest.raises(LockNotOwned):
        lock.release()


# -- resends ---------------------------------------------------------------------------------


def run_twice(backend: Any, call: tuple[str, list[str], list[Any]]) -> tuple[Any, Any]:
    """Send one script call twice, as a client that resends after a lost reply does."""
    script, keys, args = call
    run = backend.script(script)
    return run(keys=keys, args=args), run(keys=keys, args=args)


def ints(reply: Any) -> list[int]:
    return [int(x) for x in reply]


def test_a_resent_acquire_answers_as_the_first_time(redis_target: RedisTarget) -> None:
    backend = redis_target.lock_backend()
    for kwargs in ({}, {"reentrant": True}, {"owner": "job-7"}):
        lock = backend.lock("resent-acquire", ttl=5, **kwargs)
        user, owner, meta = lock._start_acquire(False, 0)[1:4]
        first, again = run_twice(backend, lock._attempt(owner, meta, False, 0))
        assert ints(first)[0] == 1 and ints(again) == ints(first), kwargs
        [held] = backend.held_locks()
        assert held.count == 1 and held.fence == ints(first)[1]
        assert lock._granted(owner, user[0], first)  # the client saw one grant
        lock.release()
        assert not lock.locked()


def test_a_resent_reentry_counts_once(redis_target: RedisTarget) -> None:
    backend = redis_target.lock_backend()
    lock = backend.lock("resent-reentry", ttl=5, reentrant=True)
    assert lock.acquire()
    owner, meta = lock._start_acquire(False, 0)[2:4]
    first, again = run_twice(backend, lock._attempt(owner, meta, False, 0))
    assert ints(first)[:2] == ints(again)[:2] == [1, lock.fence]
    [held] = backend.held_locks()
    assert held.count == 2


def test_resent_write_read_and_downgrade_apply_once(redis_target: RedisTarget) -> None:
    backend = redis_target.lock_backend()
    rw = backend.read_write_lock("resent-rw", ttl=5)
    writer = rw.write()
    user, owner, meta = writer._start_acquire(False, 0)[1:4]
    first, again = run_twice(backend, writer._attempt(owner, meta, False, 0))
    assert ints(first)[0] == 1 and ints(again) == ints(first)
    assert writer._granted(owner, user[0], first)
    hold = writer._hold
    assert hold is not None
    reader = writer._reader_for_downgrade(None)
    first, again = run_twice(backend, writer._downgrade_call(hold, reader))
    assert int(first) == int(again) == 1
    assert rw.state() == {"writer": False, "readers": 1, "writer_waiting": False}
    other = rw.read()
    owner, meta = other._start_acquire(False, 0)[2:4]
    first, again = run_twice(backend, other._attempt(owner, meta, False, 0))
    assert ints(first)[:2] == ints(again)[:2] and ints(first)[0] == 1
    assert rw.state()["readers"] == 2


def test_a_resent_partial_release_after_another_one_is_a_no_op(
    redis_target: RedisTarget,
) -> None:
    backend = redis_target.lock_backend()
    lock = backend.lock("resent-step", ttl=5, reentrant=True)
    for _ in range(3):
        assert lock.acquire()
    hold = lock._hold
    assert hold is not None
    step_a = lock._release_call(hold)
    step_b = lock._release_call(hold)
    run = backend.script("lock_release")
    assert ints(run(keys=step_a[1], args=step_a[2]))[:2] == [1, 2]
    assert ints(run(keys=step_b[1], args=step_b[2]))[:2] == [1, 1]
    # Step A reaches Redis again after step B (a retry after its reply was lost).
    assert ints(run(keys=step_a[1], args=step_a[2])) == [2, 0]
    [held] = backend.held_locks()
    assert held.count == 1


def test_a_client_that_resends_after_a_lost_reply_gets_its_grant(
    redis_target: RedisTarget,
) -> None:
    real_only(redis_target)
    backend = redis_target.lock_backend(
        SOCKET_TIMEOUT=0.15, CLIENT_KWARGS={"retry": Retry(NoBackoff(), 5)}
    )
    lock = backend.lock("resending-client", ttl=5)
    with lock:
        pass  # the scripts are loaded
    with stalled(redis_target, lock_key(backend, "resending-client", "l"), 400):
        granted = lock.acquire(blocking=False)
    # The first send was applied after the stall; the resend must see that grant as its own.
    assert granted and lock.held_by_me()
    lock.release()
    assert not lock.locked()


# -- unknown outcomes ------------------------------------------------------------------------


def test_an_acquire_that_times_out_leaves_no_orphan_grant(redis_target: RedisTarget) -> None:
    real_only(redis_target)
    backend = no_retry_backend(redis_target, timeout=0.15)
    lock = backend.lock("timed-out-acquire", ttl=5)
    with lock:
        pass
    with stalled(redis_target, lock_key(backend, "timed-out-acquire", "l"), 400):
        try:
            granted = lock.acquire(blocking=False)
        except ConnectionFailed:
            granted = False
    time.sleep(0.2)  # the server has applied whatever reached it
    if granted:  # resolved: it returned holding the grant
        assert lock.held_by_me()
        lock.release()
    assert not lock.locked(), "a grant nobody holds is left until its TTL"


def test_a_cancelled_async_acquire_leaves_no_grant(redis_target: RedisTarget) -> None:
    real_only(redis_target)
    backend = redis_target.lock_backend()

    async def main(lock: Any) -> None:
        await lock.acquire_async()
        await lock.release_async()  # the scripts are loaded
        # stalled well past the cancel 0.1 s in: a slow test process still cancels in time
        with stalled(redis_target, lock_key(backend, "cancelled-acquire", "l"), 1000):
            task = asyncio.ensure_future(lock.acquire_async(blocking=False))
            await asyncio.sleep(0.1)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
        assert not lock.held_by_me()

    for reentrant in (False, True):
        lock = backend.lock("cancelled-acquire", ttl=5, reentrant=reentrant)
        asyncio.run(main(lock))
        time.sleep(0.2)
        assert not lock.locked(), reentrant


def test_a_cancelled_async_reentry_keeps_the_outer_count(redis_target: RedisTarget) -> None:
    real_only(redis_target)
    backend = redis_target.lock_backend()
    lock = backend.lock("cancelled-reentry", ttl=5, reentrant=True)

    async def work(entered: asyncio.Event) -> None:
        assert await lock.acquire_async()
        entered.set()
        await asyncio.sleep(0.15)  # the server is stalled by then
        await lock.acquire_async(blocking=False)  # the re-entry that gets cancelled

    async def main() -> None:
        entered = asyncio.Event()
        task = asyncio.ensure_future(work(entered))
        await reached(entered, task)
        with stalled(redis_target, lock_key(backend, "cancelled-reentry", "l"), 400):
            await asyncio.sleep(0.2)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

    asyncio.run(main())
    time.sleep(0.2)
    [held] = backend.held_locks()
    assert held.count == 1 and lock.count == 1  # the cancelled re-entry was taken back
    assert backend.force_release("cancelled-reentry")


def resolving(kind: str, request: pytest.FixtureRequest) -> tuple[ProxiedTarget, Any]:
    """A proxied target and a backend whose calls redis-py does not resend (the lock does)."""
    target: ProxiedTarget = request.getfixturevalue(f"proxied_{kind}")
    backend = target.lock_backend(SOCKET_TIMEOUT=RESOLVE_SOCKET_TIMEOUT, **no_resend_options(kind))
    return target, backend


@pytest.mark.parametrize("kind", ["single", "cluster"])
def test_a_downgrade_whose_reply_is_lost_is_resolved(
    kind: str, request: pytest.FixtureRequest
) -> None:
    target, backend = resolving(kind, request)
    rw = backend.read_write_lock("lost-downgrade", ttl=30)
    writer = rw.write()
    assert writer.acquire()
    writer.downgrade().release()  # the scripts are loaded
    writer = rw.write()
    assert writer.acquire()
    # sent again until the answer is known: applied once
    reader = lose_the_reply(target, "lost-downgrade", "silent", writer.downgrade)
    assert reader.held_by_me() and reader.owned()
    assert rw.state() == {"writer": False, "readers": 1, "writer_waiting": False}
    reader.release()
    assert rw.state()["readers"] == 0


def test_an_acquire_that_arrives_after_its_take_back_grants_nothing(
    redis_target: RedisTarget,
) -> None:
    backend = redis_target.lock_backend()
    rw = backend.read_write_lock("late-rw", ttl=5)
    for lock in (
        backend.lock("late", ttl=5),
        backend.lock("late", ttl=5, reentrant=True),
        backend.lock("late", ttl=5, owner="job-9"),
        rw.write(),
        rw.read(),
    ):
        owner, meta = lock._start_acquire(False, 0)[2:4]
        script, keys, args = lock._abandon_call(owner)
        backend.script(script)(keys=keys, args=args)  # the take-back overtook the attempt
        script, keys, args = lock._attempt(owner, meta, False, 0)
        assert int(backend.script(script)(keys=keys, args=args)[0]) == 0, lock
        assert not lock.locked() and backend.held_lock_count() == 0


def test_cancelled_async_read_and_write_acquires_leave_no_grant(
    redis_target: RedisTarget,
) -> None:
    real_only(redis_target)
    backend = redis_target.lock_backend()
    rw = backend.read_write_lock("cancelled-rw", ttl=5)

    async def main(lock: Any) -> None:
        await lock.acquire_async()
        await lock.release_async()  # the scripts are loaded
        with stalled(redis_target, lock_key(backend, "cancelled-rw", "rw"), 400):
            task = asyncio.ensure_future(lock.acquire_async(blocking=False))
            await asyncio.sleep(0.1)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

    for lock in (rw.write(), rw.read()):
        asyncio.run(main(lock))
        time.sleep(0.2)
        assert rw.state() == {"writer": False, "readers": 0, "writer_waiting": False}


@pytest.mark.parametrize("kind", ["single", "cluster"])
def test_a_release_whose_reply_is_lost_is_resolved(
    kind: str, request: pytest.FixtureRequest
) -> None:
    target, backend = resolving(kind, request)
    lock = backend.lock("lost-release", ttl=30, reentrant=True)
    with lock:
        pass  # the scripts are loaded
    assert lock.acquire() and lock.acquire()
    # a partial step, its reply lost on a silent connection: resent, applied once
    lose_the_reply(target, "lost-release", "silent", lock.release)
    assert lock.count == 1 and backend.held_locks()[0].count == 1
    # the last step, its connection reset: resent, answered "already released"
    lose_the_reply(target, "lost-release", "cut", lock.release)
    assert not lock.held_by_me() and not lock.locked()
