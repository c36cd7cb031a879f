"""Waiter counts of the admin's lock listing: recorded by the acquire script, pruned by deadline."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from django_redislock.backends.redlock import RedlockBackend
from django_redislock.locking.keys import lock_key
from django_redislock.locking.pipeline import run_scripts

from .conftest import RedisTarget
from .servers import RedisProcess


def waiters_of(backend: Any, name: str) -> int:
    held = {h.name: h for h in backend.held_locks()}
    return held[name].waiters if name in held else -1


def wait_for(check: Any, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.02)
    return False


def redlock_backend(servers: list[RedisProcess]) -> RedlockBackend:
    """A Redlock alias on the session's five masters, with a key prefix of its own."""
    return RedlockBackend(
        "quorum",
        {
            "LOCATION": [server.url for server in servers],
            "KEY_PREFIX": f"wt{uuid.uuid4().hex[:8]}",
            "OPTIONS": {"QUARANTINE_FRESH_MASTERS": False, "MASTER_TIMEOUT": 2.0},
        },
    )


def force_release_keeps_counting(backend: Any, name: str) -> None:
    """Three waiters, a force release: one woken waiter gets it, the other two still count."""
    release = threading.Event()
    got: list[bool] = []

    def waiter() -> None:
        lock = backend.lock(name, ttl=10)
        got.append(lock.acquire(blocking=True, timeout=20))
        release.wait(20)
        lock.release()

    holder = backend.lock(name, ttl=10)
    assert holder.acquire(blocking=False)
    threads = [threading.Thread(target=waiter) for _ in range(3)]
    for t in threads:
        t.start()
    try:
        assert wait_for(lambda: waiters_of(backend, name) == 3)
        assert backend.force_release(name) is True
        assert wait_for(lambda: len(got) == 1)  # one woken waiter got it
        assert wait_for(lambda: waiters_of(backend, name) == 2)
    finally:
        release.set()
        for t in threads:
            t.join(30)
    assert got == [True] * 3


def test_threads_waiting_on_a_held_lock_are_counted(redis_target: RedisTarget) -> None:
    backend = redis_target.lock_backend()
    got: list[bool] = []

    def waiter() -> None:
        lock = backend.lock("order:7", ttl=10)
        got.append(lock.acquire(blocking=True, timeout=20))
        lock.release()

    with backend.lock("order:7", ttl=10):
        threads = [threading.Thread(target=waiter) for _ in range(4)]
        for t in threads:
            t.start()
        assert wait_for(lambda: waiters_of(backend, "order:7") == 4)
    for t in threads:
        t.join(30)
    assert got == [True] * 4
    with backend.lock("order:7", ttl=10):
        assert waiters_of(backend, "order:7") == 0
    client = backend.client
    assert client.zcard(lock_key(backend, "order:7", "q")) == 0


def test_a_waiter_that_never_retries_is_dropped_after_its_deadline(
    redis_target: RedisTarget,
) -> None:
    backend = redis_target.lock_backend()
    with backend.lock("order:8", ttl=10):
        # a waiting try from a caller that then dies (no retry, no grant): 1 s of waiting left
        other = backend.lock("order:8", ttl=10)
        [reply] = run_scripts(backend, [other._attempt("dead", other.meta("t", None), True, 1.0)])
        assert int(reply[0]) == 0
        assert waiters_of(backend, "order:8") == 1
        key = lock_key(backend, "order:8", "q")
        assert 0 < backend.client.pttl(key) <= 2100  # the structure expires on its own
        assert wait_for(lambda: waiters_of(backend, "order:8") == 0, timeout=3)
    assert wait_for(lambda: backend.client.exists(key) == 0, timeout=3)


def test_a_resent_waiting_try_is_counted_once(redis_target: RedisTarget) -> None:
    """A retry, or the same call sent again after a timeout, renews the caller's one entry."""
    backend = redis_target.lock_backend()
    rw = backend.read_write_lock("sheet:7", ttl=10)
    with backend.lock("order:11", ttl=10), rw.write():
        mutex = backend.lock("order:11", ttl=10)
        reader = rw.read()
        for _ in range(3):
            replies = run_scripts(
                backend,
                [
                    mutex._attempt("again", mutex.meta("t", None), True, 5.0),
                    reader._attempt("again", reader.meta("t", None), True, 5.0),
                ],
            )
            assert [int(r[0]) for r in replies] == [0, 0]
        assert waiters_of(backend, "order:11") == 1
        assert waiters_of(backend, "sheet:7") == 1
        for name in ("order:11", "sheet:7"):
            key = lock_key(backend, name, "q")
            assert backend.client.zcard(key) == 1
            assert 0 < backend.client.pttl(key) <= 6100


def test_a_non_blocking_try_is_not_a_waiter(redis_target: RedisTarget) -> None:
    backend = redis_target.lock_backend()
    with backend.lock("order:9", ttl=10):
        assert not backend.lock("order:9", ttl=10).acquire(blocking=False)
        assert waiters_of(backend, "order:9") == 0


def test_reentrant_waiters_are_counted(redis_target: RedisTarget) -> None:
    backend = redis_target.lock_backend()
    lock = backend.lock("doc:3", ttl=10, reentrant=True)
    done = threading.Event()

    def waiter() -> None:
        other = backend.lock("doc:3", ttl=10, reentrant=True)
        if other.acquire(blocking=True, timeout=20):
            other.release()
        done.set()

    with lock:
        thread = threading.Thread(target=waiter)
        thread.start()
        assert wait_for(lambda: waiters_of(backend, "doc:3") == 1)
    thread.join(30)
    assert done.is_set()


CHILD = """
import json, os, sys
os.environ["DJANGO_SETTINGS_MODULE"] = "tests.settings"
import django
django.setup()
from django_redislock.backends.redis import RedisLockBackend
backend = RedisLockBackend("test", json.loads(sys.argv[1]))
print("waiting", flush=True)
backend.lock("order:10", ttl=10).acquire(blocking=True, timeout=5)
"""


def test_a_sigkilled_waiter_is_gone_after_its_deadline(single_target: RedisTarget) -> None:
    backend = single_target.lock_backend()
    root = Path(__file__).resolve().parent.parent
    with backend.lock("order:10", ttl=60):  # held past a slow child's start
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD, json.dumps(single_target.params())],
            cwd=root,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert child.stdout is not None and child.stdout.readline().strip() == "waiting"
            assert wait_for(lambda: waiters_of(backend, "order:10") == 1)
        finally:
            child.send_signal(signal.SIGKILL)
            child.wait(10)
        assert waiters_of(backend, "order:10") == 1  # until its deadline (5 s of waiting)
        assert wait_for(lambda: waiters_of(backend, "order:10") == 0, timeout=8)


def test_writers_waiting_on_a_read_write_lock_are_counted(redis_target: RedisTarget) -> None:
    backend = redis_target.lock_backend()
    rw = backend.read_write_lock("sheet:4", ttl=10)
    got: list[bool] = []

    def writer() -> None:
        lock = rw.write()
        got.append(lock.acquire(blocking=True, timeout=20))
        lock.release()

    with rw.write():
        threads = [threading.Thread(target=writer) for _ in range(3)]
        for t in threads:
            t.start()
        assert wait_for(lambda: waiters_of(backend, "sheet:4") == 3)
    for t in threads:
        t.join(30)
    assert got == [True] * 3
    assert backend.client.zcard(lock_key(backend, "sheet:4", "q")) == 0
    with rw.read():
        assert not rw.write().acquire(blocking=False)
        assert waiters_of(backend, "sheet:4") == 0


def test_readers_waiting_on_a_read_write_lock_are_counted(redis_target: RedisTarget) -> None:
    backend = redis_target.lock_backend()
    rw = backend.read_write_lock("sheet:5", ttl=10)
    got: list[bool] = []

    def reader() -> None:
        lock = rw.read()
        got.append(lock.acquire(blocking=True, timeout=20))
        lock.release()

    with rw.write():
        threads = [threading.Thread(target=reader) for _ in range(3)]
        for t in threads:
            t.start()
        assert wait_for(lambda: waiters_of(backend, "sheet:5") == 3)
        assert not rw.read().acquire(blocking=False)  # a try that will not wait is no waiter
        assert waiters_of(backend, "sheet:5") == 3
    for t in threads:
        t.join(30)
    assert got == [True] * 3
    assert backend.client.zcard(lock_key(backend, "sheet:5", "q")) == 0  # each grant left it


def test_a_reader_that_never_retries_is_dropped_after_its_deadline(
    redis_target: RedisTarget,
) -> None:
    backend = redis_target.lock_backend()
    rw = backend.read_write_lock("sheet:6", ttl=10)
    with rw.write():
        # a waiting read try from a caller that then dies: 1 s of waiting left
        other = rw.read()
        [reply] = run_scripts(backend, [other._attempt("dead", other.meta("t", None), True, 1.0)])
        assert int(reply[0]) == 0
        assert waiters_of(backend, "sheet:6") == 1
        key = lock_key(backend, "sheet:6", "q")
        assert 0 < backend.client.pttl(key) <= 2100  # the structure expires on its own
        assert wait_for(lambda: waiters_of(backend, "sheet:6") == 0, timeout=3)
    assert wait_for(lambda: backend.client.exists(key) == 0, timeout=3)


def test_redlock_waiters_are_counted(redlock_servers: list[RedisProcess]) -> None:
    """Each waiting try is recorded on every master; the listing shows what a quorum counts."""
    backend = redlock_backend(redlock_servers)
    got: list[bool] = []

    def waiter() -> None:
        lock = backend.lock("seat:1", ttl=10)
        got.append(lock.acquire(blocking=True, timeout=20))
        lock.release()

    with backend.lock("seat:1", ttl=10):
        threads = [threading.Thread(target=waiter) for _ in range(3)]
        for t in threads:
            t.start()
        assert wait_for(lambda: waiters_of(backend, "seat:1") == 3)
        time.sleep(2.5)  # longer than one block on a master's wake-up list (MAX_BLOCK, 2 s)
        assert waiters_of(backend, "seat:1") == 3  # still waiting: still counted
    for t in threads:
        t.join(30)
    assert got == [True] * 3
    with backend.lock("seat:1", ttl=10):
        assert waiters_of(backend, "seat:1") == 0


def test_a_redlock_grant_removes_its_waiter_entry_on_the_masters_that_refused(
    redlock_servers: list[RedisProcess],
) -> None:
    """Two masters refuse a waiting try (another owner holds there) and record it as a
    waiter; the other three grant it. The fence write removes the entry on all five."""
    backend = redlock_backend(redlock_servers)
    name = "seat:2"
    lock = backend.lock(name, ttl=10)
    key, waiters = lock._key, lock._waiters_key
    raws = [server.client() for server in redlock_servers]
    for raw in raws[:2]:
        raw.hset(key, mapping={"o": "someone-else", "f": 1, "n": 1})
        raw.pexpire(key, 10_000)
    assert lock.acquire(blocking=True, timeout=5)
    try:
        assert [raw.zcard(waiters) for raw in raws] == [0] * len(raws)
    finally:
        lock.release()
        for raw in raws[:2]:
            raw.delete(key)


def test_a_force_release_keeps_counting_the_callers_that_still_wait(
    redis_target: RedisTarget,
) -> None:
    """The woken waiters retry: one gets the lock, the others are waiters again."""
    backend = redis_target.lock_backend()
    force_release_keeps_counting(backend, "order:10")
    assert backend.client.zcard(lock_key(backend, "order:10", "q")) == 0


def test_a_waiters_deadline_is_its_wait_from_now_to_the_millisecond(
    redis_target: RedisTarget,
) -> None:
    backend = redis_target.lock_backend()
    client = backend.client
    key = lock_key(backend, "order:12", "q")
    with backend.lock("order:12", ttl=10):
        other = backend.lock("order:12", ttl=10)
        call = other._attempt("late", other.meta("t", None), True, 1.0)
        # late in a server second: a deadline counted from the whole second would be < 0.5 s
        while client.time()[1] < 500_000:
            time.sleep(0.01)
        seconds, micros = client.time()
        [reply] = run_scripts(backend, [call])
        assert int(reply[0]) == 0
        deadline = client.zscore(key, "late")
        assert deadline is not None
        assert deadline - (seconds * 1000 + micros // 1000) >= 900


def test_a_dead_or_resent_redlock_waiter_counts_once_until_its_deadline(
    redlock_servers: list[RedisProcess],
) -> None:
    """A waiting try sent twice is one entry per master; if its caller then dies, every master
    drops it at its deadline (1 s of waiting left here) and the zsets expire on their own."""
    backend = redlock_backend(redlock_servers)
    with backend.lock("seat:2", ttl=10):
        other = backend.lock("seat:2", ttl=10)
        for _ in range(2):
            outcome = other._try("dead", other.meta("t", None), 1, 1.0)
            assert not outcome.fence
        assert waiters_of(backend, "seat:2") == 1
        keys = [lock_key(master, "seat:2", "q") for master in backend.masters]
        assert [m.client.zcard(k) for m, k in zip(backend.masters, keys, strict=True)] == [1] * 5
        assert wait_for(lambda: waiters_of(backend, "seat:2") == 0, timeout=3)
        assert wait_for(
            lambda: all(
                m.client.exists(k) == 0 for m, k in zip(backend.masters, keys, strict=True)
            ),
            timeout=3,
        )


def test_a_redlock_force_release_keeps_counting_the_callers_that_still_wait(
    redlock_servers: list[RedisProcess],
) -> None:
    force_release_keeps_counting(redlock_backend(redlock_servers), "seat:3")
