"""Push wake-up (on release and on expiry) and the renewal watchdog, on every server kind."""

from __future__ import annotations

import os
import threading
import time
from typing import Any

import pytest

from django_redislock import signals
from django_redislock.exceptions import LockLost, LockUsageError
from django_redislock.locks import watchdog
from django_redislock.locks.keys import lock_key

from .conftest import RedisTarget


def hold_in_thread(backend: Any, name: str, seconds: float, ttl: float = 5) -> threading.Event:
    """Take ``name`` in a thread, hold it ``seconds``, release; returns the "taken" event."""
    taken = threading.Event()

    def run() -> None:
        with backend.lock(name, ttl=ttl):
            taken.set()
            time.sleep(seconds)

    threading.Thread(target=run, daemon=True).start()
    assert taken.wait(5)
    return taken


def test_waiter_wakes_promptly_on_release(redis_target: RedisTarget) -> None:
    backend = redis_target.lock_backend()
    hold_in_thread(backend, "w", 0.3, ttl=30)
    start = time.monotonic()
    with backend.lock("w", ttl=5, timeout=10):
        waited = time.monotonic() - start
    # The holder's TTL is 30 s: only the release's push can end the wait this early.
    assert 0.2 < waited < 1.5


def test_waiter_wakes_promptly_on_expiry(redis_target: RedisTarget) -> None:
    backend = redis_target.lock_backend()
    abandoned = backend.lock("x", ttl=0.5)
    abandoned.acquire()  # never released: the holder "crashed"
    start = time.monotonic()
    with backend.lock("x", ttl=5, timeout=10):
        waited = time.monotonic() - start
    # far below the waiter's 10 s timeout; the slack absorbs a stall of a loaded CI machine
    assert 0.3 < waited < 0.5 + 0.6


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
    assert time.monotonic() - start < 5


def test_watchdog_keeps_a_short_ttl_lock_alive(redis_target: RedisTarget) -> None:
    # A TTL of 1 s leaves the renewal (due every 1/3 s) 2/3 s of slack on a slow CI machine.
    backend = redis_target.lock_backend(DEFAULT_TTL=1.0)
    lock = backend.lock("long-job")  # no explicit ttl: the watchdog renews it
    assert lock.watchdog
    with lock:
        time.sleep(2.5)  # two and a half TTLs
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
    renewed = backend.lock("k", ttl=1.0, watchdog=True)
    with renewed:
        time.sleep(2.2)
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
        assert lost_signal.wait(2)
        assert callback == [lock]
        with pytest.raises(LockLost):
            lock.ensure_held()
        with pytest.raises(LockLost):
            lock.release()
    finally:
        signals.lock_lost.disconnect(receiver)
    assert watchdog.registered() == 0


def test_watchdog_renews_read_and_write_holds(redis_target: RedisTarget) -> None:
    backend = redis_target.lock_backend(DEFAULT_TTL=1.0)
    rw = backend.read_write_lock("doc")
    with rw.read() as reader:
        time.sleep(2.2)
        reader.ensure_held()
    with rw.write() as writer:
        time.sleep(2.2)
        writer.ensure_held()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")
def test_forked_child_does_not_renew_the_parents_locks(redis_target: RedisTarget) -> None:
    if redis_target.kind == "fakeredis":
        pytest.skip("a fakeredis server lives in one process")
    backend = redis_target.lock_backend(DEFAULT_TTL=1.0)
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
    time.sleep(1.5)
    lock.ensure_held()  # the parent's watchdog still renews it
    lock.release()


def test_only_a_waited_for_release_pushes_a_wake_up(redis_target: RedisTarget) -> None:
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
