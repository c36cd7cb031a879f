"""``Semaphore`` and its permits on a real server and a real cluster.

Never more than N holders (threads, processes); a dead holder's permit comes back at its
TTL and a dead waiter's place at its lease; the limit changes at run time without taking a
permit away; waiters are granted in arrival order; a cancelled asyncio acquire leaves no
permit and no place behind; a resent acquire or release is applied once; the watchdog
renews a permit; ``@distributed_lock(permits=N)`` answers 423 when none is free.
Every assertion is a count, an order or a state; waits are for events, with bounds.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from typing import Any

import pytest
from django.http import HttpResponse
from django.test import RequestFactory

from django_redislock import distributed_lock
from django_redislock.exceptions import InvalidArgument, LockLost, LockNotAcquired
from django_redislock.locking.semaphore import LEASE_MARGIN_MS, Permit, Semaphore

from .conftest import RedisTarget
from .processes import ROOT

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(params=["single", "cluster"])
def target(request: pytest.FixtureRequest) -> RedisTarget:
    found: RedisTarget = request.getfixturevalue(f"{request.param}_target")
    return found


def semaphore(target: RedisTarget, permits: int = 2, **kwargs: Any) -> Semaphore:
    kwargs.setdefault("ttl", 30)
    kwargs.setdefault("timeout", 10)
    backend = target.lock_backend(DEFAULT_TTL=30.0)
    return backend.semaphore("exports", permits, **kwargs)


def until(check: Any, seconds: float = 10.0) -> None:
    """Wait (bounded) until ``check()`` is true."""
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "the condition never came true"
        time.sleep(0.005)


def keys_left(target: RedisTarget) -> list[bytes]:
    """The semaphore's keys still in Redis (its bucket's shared index keys excepted)."""
    return sorted(k for k in target.raw.keys("*") if b":ix:" not in k)


def blocked_clients(target: RedisTarget) -> int:
    """How many clients the server (every cluster node) has blocked in a BLPOP."""
    if target.kind == "cluster":
        nodes = target.raw.get_nodes()
        return sum(n.redis_connection.info("clients")["blocked_clients"] for n in nodes)
    return int(target.raw.info("clients")["blocked_clients"])


# -- permits ----------------------------------------------------------------------------------


def test_permits_are_granted_up_to_the_limit_each_with_its_own_id_and_fence(
    target: RedisTarget,
) -> None:
    sem = semaphore(target, 2)
    first, second = sem.acquire(), sem.acquire()
    assert isinstance(first, Permit) and isinstance(second, Permit)
    assert first.id != second.id and second.fence > first.fence
    assert first.ttl == 30 and sem.held() == 2
    assert sem.acquire(timeout=0) is None and sem.try_acquire() is None
    first.release()
    third = sem.try_acquire()
    assert third is not None and third.fence > second.fence
    second.release()
    third.release()
    assert sem.held() == 0
    assert keys_left(target) == []  # nothing left behind


def test_a_permit_is_a_context_manager_and_so_is_the_semaphore(target: RedisTarget) -> None:
    sem = semaphore(target, 1)
    with sem as permit:
        assert permit.held_by_me() and sem.held() == 1
        with pytest.raises(LockNotAcquired, match="no free permit"), sem.permit(timeout=0):
            pass
    assert sem.held() == 0
    with sem.permit() as permit:
        permit.ensure_held()
    assert sem.held() == 0


def test_async_acquire_and_async_with(target: RedisTarget) -> None:
    sem = semaphore(target, 2)

    async def main() -> list[int]:
        async with sem as one:
            two = await sem.acquire_async()
            assert two is not None
            assert await sem.acquire_async(timeout=0) is None
            held = await sem.held_async()
            await two.release_async()
            await one.ensure_held_async()
        return [held, await sem.held_async()]

    assert asyncio.run(main()) == [2, 0]


def test_bad_arguments_name_the_argument_and_write_nothing(target: RedisTarget) -> None:
    backend = target.lock_backend()
    with pytest.raises(InvalidArgument, match="permits"):
        backend.semaphore("exports", -1)
    with pytest.raises(InvalidArgument, match="permits"):
        backend.semaphore("exports", "5")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match="ttl"):
        backend.semaphore("exports", 5, ttl=-1)
    with pytest.raises(InvalidArgument, match="name"):
        backend.semaphore("{exports}", 5)
    with pytest.raises(InvalidArgument, match="unknown"):
        backend.semaphore("exports", 5, reentrant=True)
    sem = backend.semaphore("exports", 5)
    with pytest.raises(InvalidArgument, match="permits"):
        sem.permits = 2.5  # type: ignore[assignment]
    assert sem.permits == 5
    assert target.raw.keys("*") == []


def test_never_more_than_n_holders_across_threads(target: RedisTarget) -> None:
    sem = semaphore(target, 3)
    inside, most, lock = [0], [0], threading.Lock()
    errors: list[BaseException] = []

    def run() -> None:
        try:
            for _ in range(15):
                with sem:
                    with lock:
                        inside[0] += 1
                        most[0] = max(most[0], inside[0])
                    time.sleep(0.001)
                    with lock:
                        inside[0] -= 1
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == [] and not any(t.is_alive() for t in threads)
    assert 1 <= most[0] <= 3 and inside[0] == 0
    assert sem.held() == 0 and sem.waiting() == 0


def spawn(target: RedisTarget, mode: str, **args: Any) -> subprocess.Popen[str]:
    args = {"location": target.location, "options": target.options, **args}
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, "-m", "tests.semaphore_worker", mode, json.dumps(args)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )


def test_never_more_than_n_holders_across_processes(target: RedisTarget) -> None:
    """3 processes x 3 threads share 2 permits; each holder counts who is inside."""
    args = {"name": "exports", "permits": 2, "rounds": 10, "threads": 3}
    args |= {"inside": "{sem-test}:inside", "seen": "{sem-test}:seen"}
    workers = [spawn(target, "hold", **args) for _ in range(3)]
    outputs = [worker.communicate(timeout=110)[0] for worker in workers]
    assert [out.split()[0] for out in outputs] == ["done"] * 3, outputs
    seen = [int(v) for v in target.raw.lrange("{sem-test}:seen", 0, -1)]
    assert len(seen) == 3 * 3 * 10
    assert max(seen) <= 2 and min(seen) >= 1
    assert int(target.raw.get("{sem-test}:inside")) == 0


def test_a_dead_holder_loses_only_its_permit_at_its_ttl(target: RedisTarget) -> None:
    sem = semaphore(target, 2)
    mine = sem.acquire()
    assert mine is not None
    worker = spawn(target, "die", name="exports", permits=2, ttl=1.5)
    try:
        assert worker.stdout is not None
        dead_fence = int(worker.stdout.readline())
        worker.send_signal(signal.SIGKILL)
        worker.wait(10)
        assert sem.held() == 2  # the dead holder's permit stays until its TTL
        assert sem.try_acquire() is None
        after = sem.acquire(timeout=15)  # comes back at the dead permit's TTL
        assert after is not None and after.fence > dead_fence
        mine.ensure_held()  # the live holder kept its own
        assert sem.held() == 2
        after.release()
        mine.release()
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait(10)


def test_an_expired_permit_is_lost_to_its_holder(target: RedisTarget) -> None:
    sem = semaphore(target, 1, ttl=0.3, watchdog=False)
    permit = sem.acquire()
    assert permit is not None
    until(lambda: sem.held() == 0)  # expired, still in the set until a script prunes it
    with pytest.raises(LockLost):
        permit.release()
    other = sem.acquire()
    assert other is not None
    other.release()


def test_the_watchdog_renews_a_permit_taken_without_a_ttl(target: RedisTarget) -> None:
    backend = target.lock_backend(DEFAULT_TTL=0.6)
    sem = backend.semaphore("exports", 1)
    permit = sem.acquire(timeout=5)
    assert permit is not None and permit.watchdog

    def deadline_of() -> float:
        return float(target.raw.zscore(sem.keys[0], permit.id) or 0)

    first = deadline_of()
    until(lambda: deadline_of() > first)  # renewed at least once
    deadline = time.monotonic() + 1.5  # two and a half TTLs, renewed all along
    while time.monotonic() < deadline:
        permit.ensure_held()
        time.sleep(0.05)
    permit.release()
    assert sem.held() == 0


# -- the limit at run time --------------------------------------------------------------------


def test_lowering_the_limit_keeps_every_permit_held_and_new_ones_wait(
    target: RedisTarget,
) -> None:
    sem = semaphore(target, 3)
    permits = [sem.acquire() for _ in range(3)]
    assert all(p is not None for p in permits)
    sem.permits = 1
    for permit in permits:
        assert permit is not None
        permit.ensure_held()
    assert sem.held() == 3 and sem.try_acquire() is None
    first, second, third = permits
    assert first is not None and second is not None and third is not None
    first.release()
    second.release()
    assert sem.try_acquire() is None  # still one held: the limit is 1
    third.release()
    last = sem.try_acquire()
    assert last is not None
    sem.permits = 2  # raised: one more at once
    more = sem.try_acquire()
    assert more is not None and sem.held() == 2
    last.release()
    more.release()


def test_a_raised_limit_lets_a_waiter_in_without_a_release(target: RedisTarget) -> None:
    sem = semaphore(target, 1)
    held = sem.acquire()
    assert held is not None
    got: list[Permit | None] = []
    waiter = threading.Thread(target=lambda: got.append(sem.acquire(timeout=20)))
    waiter.start()
    until(lambda: sem.waiting() == 1)
    sem.permits = 2  # the waiter's object: its next try asks for 2
    waiter.join(20)
    assert got and got[0] is not None and sem.held() == 2
    got[0].release()
    held.release()


# -- arrival order ----------------------------------------------------------------------------


def test_waiters_are_granted_in_arrival_order(target: RedisTarget) -> None:
    sem = semaphore(target, 1)
    held = sem.acquire()
    assert held is not None
    order: list[int] = []

    def wait(index: int) -> None:
        permit = sem.acquire(timeout=30)
        assert permit is not None
        order.append(index)
        permit.release()

    threads = []
    for index in range(5):
        threads.append(threading.Thread(target=wait, args=(index,)))
        threads[-1].start()
        until(lambda index=index: sem.waiting() == index + 1)  # queued before the next
    held.release()
    for thread in threads:
        thread.join(30)
    assert order == [0, 1, 2, 3, 4]
    assert sem.waiting() == 0 and sem.held() == 0


def test_a_try_never_overtakes_a_queued_waiter(target: RedisTarget) -> None:
    sem = semaphore(target, 1)
    held = sem.acquire()
    assert held is not None
    got: list[Permit | None] = []
    waiter = threading.Thread(target=lambda: got.append(sem.acquire(timeout=20)))
    waiter.start()
    until(lambda: sem.waiting() == 1)
    held.release()  # the free permit is the queued waiter's, woken or not yet
    assert sem.try_acquire() is None
    waiter.join(20)
    assert got and got[0] is not None
    assert sem.try_acquire() is None  # now it holds the only permit
    got[0].release()


def test_a_dead_waiter_is_passed_over_once_its_lease_lapses(target: RedisTarget) -> None:
    sem = semaphore(target, 1)
    ghost = sem.permit()
    script, keys, args = ghost._attempt("ghost", "", True, 0.2)  # a waiter that then died
    held = sem.acquire()
    assert held is not None
    run = ghost.backend.script(script)
    assert int(run(keys=keys, args=args)[0]) == 0 and sem.waiting() == 1
    held.release()
    assert sem.try_acquire() is None  # the ghost is still first in line
    after = sem.acquire(timeout=10)  # passed over at its lease (0.2 s + the margin)
    assert after is not None and sem.waiting() == 0
    after.release()
    assert LEASE_MARGIN_MS <= 1000


# -- cancellation -----------------------------------------------------------------------------


@pytest.mark.parametrize("when", ["queued", "blocked"])
def test_a_cancelled_async_waiter_leaves_no_permit_and_no_place(
    target: RedisTarget, when: str
) -> None:
    """Cancelled once it is queued (its try's reply may still be on its way), or once it
    is blocked for its wake-up; 8 times each. A cancellation redis-py lost while a reply
    was awaited let the waiter go on and take a permit later (about one run in three
    before the guard in ``LockCalls._acall``)."""
    sem = semaphore(target, 1)

    async def ready() -> bool:
        # polled from a thread: the waiter's task runs meanwhile, so the cancellation
        # lands wherever the waiter is (a blocking poll would hold it at one await)
        if await asyncio.to_thread(sem.waiting) == 0:
            return False
        return when == "queued" or await asyncio.to_thread(blocked_clients, target) > 0

    async def once() -> tuple[int, int, int]:
        held = await sem.acquire_async()
        assert held is not None
        task = asyncio.ensure_future(sem.acquire_async(timeout=3))
        deadline = time.monotonic() + 10
        while not await ready():
            assert time.monotonic() < deadline
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        waiting, during = sem.waiting(), await sem.held_async()
        await held.release_async()
        return waiting, during, await sem.held_async()

    async def main() -> list[tuple[int, int, int]]:
        return [await once() for _ in range(8)]

    assert asyncio.run(main()) == [(0, 1, 0)] * 8
    assert keys_left(target) == [] or all(b":ss:" in key for key in keys_left(target))


def test_cancelled_at_any_moment_an_async_acquire_leaves_nothing(target: RedisTarget) -> None:
    """A sweep of cancellation moments over acquires that get their permit or wait for it."""
    sem = semaphore(target, 2)

    async def one(delay: float, busy: bool) -> None:
        held = await sem.acquire_async() if busy else None
        task = asyncio.ensure_future(sem.acquire_async(timeout=5))
        await asyncio.sleep(delay)
        task.cancel()
        try:
            permit = await task
        except asyncio.CancelledError:
            permit = None
        if permit is not None:  # it finished before the cancellation: released as usual
            await permit.release_async()
        if held is not None:
            await held.release_async()

    async def main() -> None:
        for step in range(24):
            await one(step * 0.0005, busy=step % 2 == 1)
            await asyncio.sleep(0)

    asyncio.run(main())
    until(lambda: sem.held() == 0 and sem.waiting() == 0)
    assert keys_left(target) == [] or all(b":ss:" in key for key in keys_left(target))


# -- resends ----------------------------------------------------------------------------------


def test_a_resent_acquire_and_release_are_applied_once(target: RedisTarget) -> None:
    sem = semaphore(target, 2)
    permit = sem.permit()
    script, keys, args = permit._attempt("caller-1", "", False, 0.0)
    run = permit.backend.script(script)
    first = run(keys=keys, args=args)
    again = run(keys=keys, args=args)  # the same request resent after a lost reply
    assert first[0] == again[0] == 1 and first[1] == again[1] and sem.held() == 1
    member = f"caller-1@{int(first[1])}"
    release = permit._release_call(_hold(member, int(first[1])))
    out = permit.backend.script(release[0])
    assert out(keys=release[1], args=release[2])[0] == 1
    assert out(keys=release[1], args=release[2]) == [2, 0]  # the resent release: a no-op
    assert sem.held() == 0


def test_a_taken_back_acquire_that_arrives_late_grants_nothing(target: RedisTarget) -> None:
    sem = semaphore(target, 2)
    permit = sem.permit()
    script, keys, args = permit._attempt("caller-2", "", True, 5.0)
    back = permit._abandon_call("caller-2")
    permit.backend.script(back[0])(keys=back[1], args=back[2])  # taken back first
    late = permit.backend.script(script)(keys=keys, args=args)
    assert late[0] == 0 and sem.held() == 0 and sem.waiting() == 0


def _hold(owner: str, fence: int) -> Any:
    from django_redislock.locking.owners import Hold

    return Hold(owner, fence, "test")


# -- the decorator ----------------------------------------------------------------------------


def test_distributed_lock_with_permits_admits_n_and_answers_423(target: RedisTarget) -> None:
    from django.test import override_settings

    params = {**target.params(), "KEY_PREFIX": "test"}
    inside = threading.Semaphore(0)
    leave = threading.Event()

    @distributed_lock("report:{tenant}", permits=2, timeout=0)
    def view(request: Any, tenant: str) -> HttpResponse:
        inside.release()
        leave.wait(20)
        return HttpResponse("ok")

    with override_settings(REDISLOCK_LOCKS={"default": params}):
        request = RequestFactory().get("/")
        results: list[int] = []
        threads = [
            threading.Thread(target=lambda: results.append(view(request, "t1").status_code))
            for _ in range(2)
        ]
        for thread in threads:
            thread.start()
        assert inside.acquire(timeout=20) and inside.acquire(timeout=20)
        refused = view(request, "t1")
        assert refused.status_code == 423 and int(refused["Retry-After"]) >= 1
        leave.set()
        for thread in threads:
            thread.join(20)
        assert results == [200, 200]
        assert view(request, "t1").status_code == 200
