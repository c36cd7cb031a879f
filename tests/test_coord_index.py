"""The coordination index (issue 30's admin listing): semaphores and fair locks in use are
listed with their holders and waiters without a scan of the keyspace; the entry is written by
the script that grants or queues and removed by the one that leaves nothing behind; force
release ends one permit or one fair hold and hands it to the next waiter (single, cluster).
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from django_redislock.backends.redis import RedisLockBackend
from django_redislock.exceptions import LockLost
from django_redislock.locking import coordindex
from django_redislock.locking.keys import bucket_keys, lock_key

from .conftest import RedisTarget
from .processes import wait_for


@pytest.fixture(params=["single", "cluster"])
def backend(request: pytest.FixtureRequest) -> RedisLockBackend:
    target: RedisTarget = request.getfixturevalue(f"{request.param}_target")
    return RedisLockBackend("test", {**target.params(), "KEY_PREFIX": "test"})


def listed(backend: RedisLockBackend) -> dict[tuple[str, str], coordindex.Coordinated]:
    return {(e.kind, e.name): e for e in coordindex.listing(backend).entries}


def queued(sem: Any, n: int) -> None:
    wait_for(lambda: sem.waiting() == n, 60, f"{n} waiters")


def index_size(backend: RedisLockBackend) -> int:
    return coordindex.listing(backend, limit=0).total


def test_a_semaphore_is_listed_while_held_and_gone_after(backend: RedisLockBackend) -> None:
    sem = backend.semaphore("exports:t7", permits=2, ttl=30)
    first, second = sem.acquire(), sem.acquire()
    assert first is not None and second is not None
    entry = listed(backend)[("semaphore", "exports:t7")]
    assert entry.holder_count == 2 and entry.waiter_count == 0
    assert {h.id for h in entry.holders} == {first.id, second.id}
    assert {h.fence for h in entry.holders} == {first.fence, second.fence}
    assert all(0 < h.expires_in <= 30 for h in entry.holders)
    first.release()
    assert listed(backend)[("semaphore", "exports:t7")].holder_count == 1
    second.release()
    assert ("semaphore", "exports:t7") not in listed(backend)
    assert index_size(backend) == 0  # the last release removed the entry


def test_semaphore_waiters_are_listed_in_arrival_order(backend: RedisLockBackend) -> None:
    sem = backend.semaphore("s", permits=1, ttl=30)
    held = sem.acquire()
    assert held is not None
    got: list[Any] = []
    threads = []
    for n in range(2):
        thread = threading.Thread(target=lambda: got.append(sem.acquire(timeout=30)))
        thread.start()
        threads.append(thread)
        queued(sem, n + 1)
    entry = listed(backend)[("semaphore", "s")]
    assert entry.waiter_count == 2
    assert [w.arrival for w in entry.waiters] == sorted(w.arrival for w in entry.waiters)
    assert all(w.lease_left is not None and w.lease_left > 0 for w in entry.waiters)
    held.release()
    wait_for(lambda: len(got) >= 1, 60, "the first waiter granted")
    got[0].release()
    for thread in threads:
        thread.join(60)
    got[1].release()
    assert index_size(backend) == 0


def test_a_fair_lock_is_listed_with_holder_and_waiters(backend: RedisLockBackend) -> None:
    lock = backend.fair_lock("report:<1>", ttl=30, wait_lease=30)
    assert lock.acquire()
    entry = listed(backend)[("fair", "report:<1>")]
    [holder] = entry.holders
    assert holder.fence == lock.fence and holder.info.get("pid") is not None
    done = threading.Event()
    other = backend.fair_lock("report:<1>", ttl=30, wait_lease=30)

    def wait() -> None:
        assert other.acquire(timeout=30)
        other.release()
        done.set()

    thread = threading.Thread(target=wait)
    thread.start()
    wait_for(lambda: lock.waiting() == 1, 60, "a queued waiter")
    entry = listed(backend)[("fair", "report:<1>")]
    assert entry.waiter_count == 1 and entry.waiters[0].arrival == 1
    lock.release()
    thread.join(60)
    assert done.is_set()
    assert ("fair", "report:<1>") not in listed(backend)
    assert index_size(backend) == 0


def test_a_renewal_moves_the_entry_later(backend: RedisLockBackend) -> None:
    """What the watchdog does: an entry scored by the grant's TTL would lapse while held."""
    permit = backend.semaphore("renewed", permits=1, ttl=5).permit()
    fair = backend.fair_lock("renewed-fair", ttl=5)
    assert permit.acquire() and fair.acquire()
    fair.extend(60)
    permit.extend(60)
    index = backend.client
    scores = [
        index.zscore(bucket_keys(backend, n).coord, key)
        for n, key in (
            ("renewed", lock_key(backend, "renewed", "sp")),
            ("renewed-fair", lock_key(backend, "renewed-fair", "fl")),
        )
    ]
    now = index.time()
    now_ms = int(now[0]) * 1000 + int(now[1]) // 1000
    assert all(score is not None and score > now_ms + 30_000 for score in scores)
    permit.release()
    fair.release()


def test_force_release_of_a_permit_wakes_the_next_waiter(backend: RedisLockBackend) -> None:
    sem = backend.semaphore("forced", permits=1, ttl=30)
    held = sem.acquire()
    assert held is not None
    got: list[Any] = []
    thread = threading.Thread(target=lambda: got.append(sem.acquire(timeout=30)))
    thread.start()
    wait_for(lambda: sem.waiting() == 1, 60, "a queued waiter")
    assert coordindex.force_release_permit(backend, "forced", held.id)
    assert not coordindex.force_release_permit(backend, "forced", held.id)  # gone already
    thread.join(60)
    assert got and got[0] is not None
    with pytest.raises(LockLost):
        held.ensure_held()
    got[0].release()


def test_force_release_of_a_fair_hold_checks_the_fence(backend: RedisLockBackend) -> None:
    lock = backend.fair_lock("forced-fair", ttl=30, wait_lease=30)
    assert lock.acquire()
    fence = lock.fence
    other = backend.fair_lock("forced-fair", ttl=30, wait_lease=30)
    fences: list[int] = []

    def wait() -> None:
        if other.acquire(timeout=30):
            fences.append(other.fence)
            other.release()

    thread = threading.Thread(target=wait)
    thread.start()
    wait_for(lambda: lock.waiting() == 1, 60, "a queued waiter")
    assert not coordindex.force_release_fair(backend, "forced-fair", fence + 1000)
    assert coordindex.force_release_fair(backend, "forced-fair", fence)
    thread.join(60)
    assert fences and fences[0] > fence
    with pytest.raises(LockLost):
        lock.ensure_held()
    assert index_size(backend) == 0


def test_a_latch_is_listed_with_its_count_and_waiters(backend: RedisLockBackend) -> None:
    done = backend.latch("report:<7>", count=2)
    assert done.count_down() == 1
    entry = listed(backend)[("latch", "report:<7>")]
    assert entry.count == 1 and entry.waiter_count == 0
    results: list[bool] = []
    threads = [threading.Thread(target=lambda: results.append(done.wait(30))) for _ in range(2)]
    for thread in threads:
        thread.start()
    wait_for(lambda: listed(backend)[("latch", "report:<7>")].waiter_count == 2, 60, "waiters")
    assert all(w.lease_left for w in listed(backend)[("latch", "report:<7>")].waiters)
    assert done.count_down() == 0
    for thread in threads:
        thread.join(60)
    assert results == [True, True]
    entry = listed(backend)[("latch", "report:<7>")]
    assert entry.count == 0 and entry.waiter_count == 0  # open, kept for its ttl
    assert not backend.client.exists(done._waiters_key)  # the reads that saw it open left
    done.delete()
    assert ("latch", "report:<7>") not in listed(backend) and index_size(backend) == 0


def test_a_latch_wait_that_times_out_removes_its_record(backend: RedisLockBackend) -> None:
    done = backend.latch("slow", count=1)
    assert done.wait(0.2) is False
    assert listed(backend)[("latch", "slow")].waiter_count == 0
    assert not backend.client.exists(done._waiters_key)
