"""Push wake-up (on release and on expiry) and the renewal watchdog, on every server kind."""

from __future__ import annotations

import os
import threading
import time
from typing import Any

import pytest

from django_redislock import signals
from django_redislock.exceptions import LockLost, LockUsageError
from django_redislock.locking import mutex, watchdog
from django_redislock.locking.keys import lock_key

from .conftest import RedisTarget


def hold_in_thread(backend: Any, name: str, seconds: float, ttl: float = 5) -> float:
    """Take ``name`` in a thread, hold it ``seconds``, release; returns when it was taken.

    The holder sleeps ``seconds`` after that moment, so nobody can get the lock
    before ``taken_at + seconds``, however late the caller's thread runs again.
    """
    taken = threading.Event()
    taken_at: list[float] = []

    def run() -> None:
        with backend.lock(name, ttl=ttl):
            taken_at.append(time.monotonic())
            taken.set()
            time.sleep(seconds)

    threading.Thread(target=run, daemon=True).start()
    assert taken.wait(5)
    return taken_at[0]


#: The waiters below block at most ``SOCKET_TIMEOUT * 0.8`` = 8 s per wait: had the push
#: (or the wake-up at the holder's expiry) not come, they would wake only after that.
SOCKET_TIMEOUT = 10.0


def test_waiter_wakes_promptly_on_release(redis_target: RedisTarget) -> None:
    backend = redis_target.lock_backend(SOCKET_TIMEOUT=SOCKET_TIMEOUT)
    taken_at = hold_in_thread(backend, "w", 0.3, ttl=30)
    start = time.monotonic()
    with backend.lock("w", ttl=5, timeout=20):
        acquired = time.monotonic()
    assert acquired - taken_at >= 0.25  # it did wait for the holder's 0.3 s
    # The holder's TTL is 30 s and the waiter blocks up to 8 s at a time: only the release's
    # push can end the wait before that (the bound is the failure's, not a latency target:
    # how soon a push wakes a waiter is the locks benchmark's figure).
    assert acquired - start < 6.0


def test_waiter_wakes_promptly_on_expiry(redis_target: RedisTarget) -> None:
    backend = redis_target.lock_backend(SOCKET_TIMEOUT=SOCKET_TIMEOUT)
    start = time.monotonic()
    abandoned = backend.lock("x", ttl=0.5)
    abandoned.acquire()  # never released: the holder "crashed"
    with backend.lock("x", ttl=5, timeout=20):
        waited = time.monotonic() - start
    # Not before the abandoned hold expired (0.5 s after ``start`` at the earliest), and
    # before the 8 s a waiter blocks when nothing ends its wait (the failure's bound).
    assert 0.4 < waited < 6.0


def test_many_waiters_each_get_the_lock_once(redis_target: RedisTarget) -> None:
    backend = redis_target.lock_backend()
    got: list[int] = []
    inside = threading.Lock()

    def worker(i: int) -> None:
        with backend.lock("q", ttl=5, timeout=20):
            assert inside.acquire(blocking=False)
            time.sleep(0.02)
            got.append(i)
            inside.release()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(6)]
    start = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sorted(got) == list(range(6))
    # each hand-off by push: without it, waiters would sit out 8 s blocks one after another
    assert time.monotonic() - start < 20


def test_watchdog_keeps_a_short_ttl_lock_alive(redis_target: RedisTarget) -> None:
    # A TTL of 2 s leaves the renewal (due every 2/3 s) 4/3 s of slack on a slow CI machine.
    backend = redis_target.lock_backend(DEFAULT_TTL=2.0)
    lock = backend.lock("long-job")  # no explicit ttl: the watchdog renews it
    assert lock.watchdog
    with lock:
        time.sleep(4.5)  # two and a quarter TTLs
        lock.ensure_held()
        assert backend.lock("long-job", ttl=5).acquire(blocking=False) is False
    assert watchdog.registered() == 0


def test_explicit_ttl_means_no_watchdog_unless_asked(redis_target: RedisTarget) -> None:
    backend = redis_target.lock_backend()
    lock = backend.lock("j", ttl=0.3)
    assert not lock.watchdog
    lock.acquire()
    time.sleep(0.45)
    with pytest.raises(LockLost):
        lock.ensure_held()
    renewed = backend.lock("k", ttl=2.0, watchdog=True)  # renewals 4/3 s before expiry
    with renewed:
        time.sleep(2.6)  # past the 2 s TTL: only renewals keep it
        renewed.ensure_held()


def test_watchdog_reports_loss(redis_target: RedisTarget) -> None:
    backend = redis_target.lock_backend(DEFAULT_TTL=0.3)
    lost_signal = threading.Event()
    callback: list[Any] = []

    def receiver(**kwargs: Any) -> None:
        if kwargs["name"] == "doomed":
            lost_signal.set()

    signals.lock_lost.connect(receiver)
    try:
        lock = backend.lock("doomed", on_lost=callback.append)
        lock.acquire()
        redis_target.raw.delete(lock_key(backend, "doomed", "l"))  # someone deletes the key
        assert lost_signal.wait(30)  # the first renewal (after 0.1 s) finds the key gone
        assert callback == [lock]
        with pytest.raises(LockLost):
            lock.ensure_held()
        with pytest.raises(LockLost):
            lock.release()
    finally:
        signals.lock_lost.disconnect(receiver)
    assert watchdog.registered() == 0


def test_watchdog_renews_read_and_write_holds(redis_target: RedisTarget) -> None:
    # A TTL of 2 s leaves each renewal (due every 2/3 s) 4/3 s of slack; the read and the
    # write hold (of two read-write locks) are renewed over the same sleep.
    backend = redis_target.lock_backend(DEFAULT_TTL=2.0)
    doc, sheet = backend.read_write_lock("doc"), backend.read_write_lock("sheet")
    with doc.read() as reader, sheet.write() as writer:
        time.sleep(2.6)  # past the 2 s TTL: only renewals keep them
        reader.ensure_held()
        writer.ensure_held()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")
def test_forked_child_does_not_renew_the_parents_locks(redis_target: RedisTarget) -> None:
    if redis_target.kind == "fakeredis":
        pytest.skip("a fakeredis server lives in one process")
    backend = redis_target.lock_backend(DEFAULT_TTL=2.0)  # renewals 4/3 s before expiry
    lock = backend.lock("parent-lock")
    lock.acquire()
    assert watchdog.registered() == 1
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through its exit code
        code = 0 if watchdog.registered() == 0 else 3
        try:
            lock.release()  # the child must not end the parent's hold either
            code = 4
        except LockUsageError:
            pass
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    time.sleep(2.5)  # past the 2 s TTL
    lock.ensure_held()  # the parent's watchdog still renews it
    lock.release()


def test_only_a_waited_for_release_pushes_a_wake_up(
    redis_target: RedisTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A pushed wake-up lives SIGNAL_MS (1 s); a longer life here keeps a stall of a loaded
    # machine between the release and the LLEN below from expiring it.
    monkeypatch.setattr(mutex, "SIGNAL_MS", 10_000)
    backend = redis_target.lock_backend()
    signal_key = lock_key(backend, "flag", "s")
    with backend.lock("flag", ttl=5):
        pass
    assert not redis_target.raw.exists(signal_key)  # nobody waited: no write
    holder = backend.lock("flag", ttl=5)
    holder.acquire()
    assert backend.lock("flag", ttl=5).acquire(timeout=0.05) is False  # a waiter marks the hold
    holder.release()
    assert redis_target.raw.llen(signal_key) == 1
