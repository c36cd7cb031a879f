"""A resent lock request is recognised however many other requests its bucket saw meanwhile.

issue 23: the bucket's request memory kept about the last 1,024 entries, so under load (about
220 releases/s per bucket with the default resend window) an entry was trimmed before its
resend arrived, and the resend was applied again. Here one bucket sees more than 1,024 other
recorded requests between a request and its resend (same request, same id), on a real server.
The memory now keeps every entry for the resend window (fragments/requests.lua).
"""

from __future__ import annotations

import itertools
from typing import Any

from django_redislock.backends.redis import RedisLockBackend

from .conftest import RedisTarget

FLOOD = 1_200  # more than the old memory's 1,024 entries


def _backend(target: RedisTarget) -> RedisLockBackend:
    return target.lock_backend(LOCK_INDEX_BUCKETS=1)  # every name in the one bucket


def _flood(backend: RedisLockBackend) -> None:
    """FLOOD other requests the bucket records: mutex holds granted and released."""
    for i in range(FLOOD):
        lock = backend.lock(f"flood-{i}", ttl=5)
        assert lock.acquire(blocking=False)
        lock.release()


def _run(backend: RedisLockBackend, call: tuple[str, list[str], list[Any]]) -> list[int]:
    script, keys, args = call
    return [int(x) for x in backend.script(script)(keys=keys, args=args)]


def test_a_resent_partial_reentrant_release_applies_once(single_target: RedisTarget) -> None:
    backend = _backend(single_target)
    lock = backend.lock("re", ttl=30, reentrant=True)
    lock.acquire()
    lock.acquire()
    hold = lock._hold
    assert hold is not None
    step = lock._release_call(hold)
    assert _run(backend, step)[:2] == [1, 1]
    _flood(backend)
    assert _run(backend, step) == [2, 0]  # the resend: already done
    # The holder still counts 1, so the hold must still be there and exclude others.
    assert backend.lock("re", ttl=5).acquire(blocking=False) is False
    [held] = [h for h in backend.held_locks() if h.name == "re"]
    assert held.count == 1


def test_a_resent_mutex_release_is_no_false_lock_lost(single_target: RedisTarget) -> None:
    backend = _backend(single_target)
    lock = backend.lock("mx", ttl=30)
    lock.acquire()
    hold = lock._hold
    assert hold is not None
    call = lock._release_call(hold)
    assert _run(backend, call)[:2] == [1, 0]
    _flood(backend)
    assert _run(backend, call) == [2, 0]  # not [0, 0], which release() reports as LockLost


def test_an_acquire_arriving_after_its_take_back_grants_nothing(
    single_target: RedisTarget,
) -> None:
    backend = _backend(single_target)
    lock = backend.lock("late", ttl=30, owner="task-5")
    lock._rid = "late-request-1"
    attempt = lock._attempt("task-5", "{}", False, 0.0)
    # The caller gave up on the acquire before it reached Redis and took it back.
    assert _run(backend, lock._abandon_call("task-5")) == [0, 0]
    _flood(backend)
    assert _run(backend, attempt) == [0, 0]  # arriving late, it grants nothing
    assert not lock.locked()


def test_a_resent_read_acquire_is_granted_once(single_target: RedisTarget) -> None:
    backend = _backend(single_target)
    rw = backend.read_write_lock("doc", ttl=30)
    reader = rw.read()
    owner = reader._owner_for_attempt("")
    attempt = reader._attempt(owner, "{}", False, 0.0)
    granted = _run(backend, attempt)
    assert granted[0] == 1 and granted[2] == 1
    _flood(backend)
    assert _run(backend, attempt) == granted  # the resend answers the same grant
    assert rw.state()["readers"] == 1


def test_the_memory_forgets_what_is_older_than_the_window(single_target: RedisTarget) -> None:
    """Bounded by time, not count: a slot's records go once a newer slot is past the window."""
    backend = _backend(single_target)
    raw = single_target.raw

    def release_one(name: str) -> str:
        lock = backend.lock(name, ttl=30)
        lock.acquire()
        fence = lock.fence
        lock.release()
        return str(fence)

    def age_markers(key: str, slots: int) -> None:
        """Move this slot's marks ("~" its start, "!" its forgetting done) back as if they
        had been recorded ``slots`` slots ago."""
        marks = [m for m in raw.zrange(key, 0, -1) if m[:1] in (b"~", b"!")]
        newest = max(int(m[1:]) for m in marks)
        for mark in marks:
            if int(mark[1:]) == newest:
                score = raw.zscore(key, mark)
                raw.zrem(key, mark)
                raw.zadd(key, {mark[:1] + b"%d" % (newest - slots): score})

    key = backend.lock("x", ttl=30)._release_keys[2]
    oldest = release_one("a")
    age_markers(key, 14)  # recorded 140 s ago
    older = release_one("b")
    age_markers(key, 13)  # recorded 130 s ago: past the 120 s window
    newest = release_one("c")  # the first record of this slot trims
    left = {m.decode() for m in raw.zrange(key, 0, -1) if m[:1] not in (b"~", b"!")}
    assert oldest not in left
    assert {older, newest} <= left


def test_forgetting_is_bounded_per_call_and_goes_on_until_done(
    single_target: RedisTarget,
) -> None:
    """A busy bucket's expired slot is forgotten in bounded steps, not in one stall.

    Dropping a whole slot of records in the one call that opened the next slot took 34-113 ms
    for 80,000 entries, stalling every client of the server; now each call drops at most
    REQUEST_FORGET_MAX (1,000) and the following records of the slot go on.
    """
    backend = _backend(single_target)
    raw = single_target.raw
    lock = backend.lock("bounded", ttl=30)
    key, fence_key = lock._release_keys[2], lock._release_keys[4]
    seconds, micros = raw.time()
    slot = (seconds * 1000 + micros // 1000) // 10_000
    stale = 2_500
    raw.zadd(key, {f"old-{i}": i for i in range(stale)})
    raw.zadd(key, {f"~{slot - 13}": stale})  # a slot past the window began after all of them
    raw.zadd(key, {"recent": 9_000})  # recorded within the window
    raw.set(fence_key, 10_000)  # the counter went on meanwhile

    def old_left() -> int:
        return int(raw.zcount(key, "-inf", f"({stale}"))

    left = [old_left()]
    for _ in range(4):
        assert lock.acquire(blocking=False)
        lock.release()
        left.append(old_left())
    steps = [a - b for a, b in itertools.pairwise(left)]
    assert all(step <= 1_000 for step in steps), steps  # never the whole slot in one call
    assert left[-1] == 0, left  # and every stale entry went within a few records
    assert raw.zscore(key, "recent") is not None  # nothing within the window was forgotten
