"""Locks as users write them: a lock object per call, and the default (watchdog) lock.

``with locks[alias].lock(name, ttl=10):`` builds a new object per call, and a lock taken
without ``ttl`` is renewed by the watchdog. Neither may cost more than a reused object
beyond the object itself: the keys and prepared calls of a name are built once, and the
watchdog's thread lives for the process (docs/benchmarks-history.md, "Locks as users write them").
"""

from __future__ import annotations

import os
import threading
import time

import pytest

from django_redislock.locking.watchdog import watchdog

from .conftest import RedisTarget


def test_lock_objects_of_one_name_share_their_prepared_calls(redis_target: RedisTarget) -> None:
    backend = redis_target.lock_backend()
    first = backend.lock("per-call", ttl=5)
    with first:
        fence = first.fence
    second = backend.lock("per-call", ttl=5)
    with second:
        assert second.fence > fence
        fence = second.fence
    for script in ("lock_acquire", "lock_release"):
        assert second._scripts._entries[script] is first._scripts._entries[script]
    other = redis_target.lock_backend()  # another backend (a settings change): its own calls
    third = other.lock("per-call", ttl=5)
    with third:
        assert third.fence > fence
    assert third._scripts._entries["lock_acquire"] is not first._scripts._entries["lock_acquire"]


def test_back_to_back_default_locks_keep_one_watchdog_thread(redis_target: RedisTarget) -> None:
    """The thread once exited when it woke to find the hold released, and the next hold
    started another (on 4 cycles in 10 here); now one thread serves them all."""
    backend = redis_target.lock_backend()
    threads = set()
    for _ in range(300):
        with backend.lock("default-cycles"):  # no ttl: the watchdog renews it
            pass
        threads.add(watchdog._thread)
        time.sleep(0.0005)  # time for a woken thread to run, as between two requests
    assert len(threads) == 1 and None not in threads
    thread = threads.pop()
    assert thread is not None and thread.is_alive() and thread.daemon


def renewals(target: RedisTarget, key: str, wanted: int, within: float) -> int:
    """Renewals of ``key`` seen (its PTTL going back up), up to ``wanted``; stops early
    when the key is gone (expired) or after ``within`` seconds.

    Counting renewals rather than sleeping a few TTLs keeps the test about the watchdog's
    waking, not about how fast a loaded machine schedules its thread: the TTL can be long
    enough (a second) that a late renewal still lands before it ends.
    """
    seen, last = 0, None
    deadline = time.monotonic() + within
    while seen < wanted and time.monotonic() < deadline:
        pttl = int(target.raw.pttl(key))
        if pttl < 0:
            return seen
        if last is not None and pttl > last + 50:
            seen += 1
        last = pttl
        time.sleep(0.01)
    return seen


def test_a_parked_watchdog_wakes_for_a_hold_due_before_its_plan(redis_target: RedisTarget) -> None:
    backend = redis_target.lock_backend()
    with backend.lock("long-plan", ttl=30, watchdog=True):  # the thread plans 10 s ahead
        short = backend.lock("short-plan", ttl=1.0, watchdog=True)
        with short:
            # a thread left parked on its 10 s plan would let this hold expire unrenewed
            assert renewals(redis_target, short._key, 2, within=30.0) == 2
            short.ensure_held()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")
def test_a_forked_child_gets_its_own_watchdog_thread(redis_target: RedisTarget) -> None:
    if redis_target.kind == "fakeredis":
        pytest.skip("a fakeredis server lives in one process")
    backend = redis_target.lock_backend()
    with backend.lock("fork-parent"):
        pass
    parent = watchdog._thread
    assert parent is not None and parent.is_alive()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through its exit code
        code = 1
        try:
            lock = backend.lock("fork-child", ttl=1.0, watchdog=True)
            with lock:
                if renewals(redis_target, lock._key, 2, within=30.0) < 2:
                    os._exit(3)  # not renewed: no watchdog thread of its own in the child
                lock.ensure_held()  # renewed by the child's own thread
                mine = watchdog._thread
                code = 0 if mine is not None and mine.is_alive() and mine is not parent else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert watchdog._thread is parent and parent.is_alive()


def test_the_watchdog_thread_does_not_keep_the_interpreter_alive() -> None:
    assert all(t.daemon for t in threading.enumerate() if t.name == "redislock-watchdog")
