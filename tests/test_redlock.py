"""The Redlock backend on the session's 5 independent masters (fast tests).

Dead masters are simulated here with URLs of ports nothing listens on; the
fault tests with real processes stopped and restarted are in
``test_redlock_faults.py``.
"""

from __future__ import annotations

import asyncio
import io
import json
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from django.core.management import call_command
from django.test import override_settings

from django_redislock import distributed_lock, locks, signals
from django_redislock.backends.redlock import RedlockBackend
from django_redislock.exceptions import (
    ConfigurationError,
    ConnectionFailed,
    InvalidArgument,
    LockLost,
)
from django_redislock.locking import mutex
from django_redislock.redlock import lock as redlock_lock
from django_redislock.redlock.masters import Master

from .servers import RedisProcess, closed_port


def dead_url() -> str:
    return f"redis://127.0.0.1:{closed_port()}/0"


#: How long a live master may take to answer here: generous, so that a stall of a loaded CI
#: machine does not count a live master as down (dead ones here refuse connections at once).
MASTER_TIMEOUT = 2.0


def redlock(urls: list[str], prefix: str | None = None, **options: Any) -> RedlockBackend:
    """A Redlock backend on ``urls`` with its own key prefix (the masters are shared)."""
    opts = {"QUARANTINE_FRESH_MASTERS": False, "MASTER_TIMEOUT": MASTER_TIMEOUT, **options}
    prefix = prefix or f"rl{uuid.uuid4().hex[:8]}"
    return RedlockBackend("quorum", {"LOCATION": urls, "KEY_PREFIX": prefix, "OPTIONS": opts})


@pytest.fixture
def urls(redlock_servers: list[RedisProcess]) -> list[str]:
    return [server.url for server in redlock_servers]


def test_grant_is_exclusive_fenced_listed_and_released(urls: list[str]) -> None:
    backend = redlock(urls)
    first = backend.lock("order:1", ttl=5)
    assert first.acquire(blocking=False)
    assert first.fence >= 1 and first.locked() and first.owned()
    assert not backend.lock("order:1", ttl=5).acquire(blocking=False)
    (held,) = backend.held_locks()
    assert (held.name, held.kind, held.fence) == ("order:1", "quorum", first.fence)
    assert 0 < held.expires_in <= 5 and backend.held_lock_count() == 1
    fence = first.fence
    first.release()
    assert not first.locked() and backend.held_locks() == []
    second = backend.lock("order:1", ttl=5)
    with second:
        assert second.fence > fence


def test_two_dead_masters_still_grant_three_do_not(urls: list[str]) -> None:
    backend = redlock([*urls[:3], dead_url(), dead_url()])
    with backend.lock("two-down", ttl=5) as lock:
        assert not backend.lock("two-down", ttl=5).acquire(blocking=False)
        assert lock.owned()
        assert [held.name for held in backend.held_locks()] == ["two-down"]
    short = redlock([*urls[:2], dead_url(), dead_url(), dead_url()])
    started = time.monotonic()
    with pytest.raises(ConnectionFailed, match="only 2 of 5 Redlock masters"):
        short.lock("three-down", ttl=5).acquire(timeout=0.5)
    assert time.monotonic() - started < 8.0  # the 0.5 s timeout, not DEFAULT_TIMEOUT (10 s)


@pytest.fixture
def echo_url() -> Iterator[str]:
    """A loopback peer that sends every byte back: what a TCP self-connect looks like.

    A client connecting to a closed port of the ephemeral range can be given
    that very port as its own, and then reads its own commands as replies.
    """
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.1)
    stop = threading.Event()

    def echo(conn: socket.socket) -> None:
        with conn:
            conn.settimeout(0.1)
            while not stop.is_set():
                try:
                    data = conn.recv(65536)
                except TimeoutError:
                    continue
                if not data:
                    return
                conn.sendall(data)

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            threading.Thread(target=echo, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"redis://127.0.0.1:{listener.getsockname()[1]}/0"
    stop.set()
    thread.join(timeout=5)
    listener.close()


@pytest.mark.parametrize("protocol", [2, 3])
def test_a_master_that_echoes_commands_counts_as_unreachable(
    urls: list[str], echo_url: str, protocol: int
) -> None:
    kwargs = {"protocol": protocol}
    backend = redlock([echo_url, *urls[1:]], CLIENT_KWARGS=kwargs)
    with pytest.raises(redis.ConnectionError, match="not a Redis server"):
        backend.masters[0].client.ping()
    lock = backend.lock("echoed", ttl=5)
    assert lock.acquire(blocking=False)  # four real masters make a quorum
    assert lock.fence > 0
    lock.release()
    minority = redlock([echo_url, dead_url(), dead_url(), *urls[3:]], CLIENT_KWARGS=kwargs)
    with pytest.raises(ConnectionFailed, match="only 2 of 5"):
        minority.lock("echoed", ttl=5).acquire(blocking=False)


def test_fence_grows_across_grants_on_different_quorums(urls: list[str]) -> None:
    prefix = f"rl{uuid.uuid4().hex[:8]}"
    everyone = redlock(urls, prefix)
    probe = everyone.lock("f", ttl=5)
    fence_key = probe._index.fence
    everyone.masters[0].client.set(fence_key, 100)  # one master issued many more fences
    with probe:
        assert probe.fence == 101
    # A later grant by a quorum without master 0 still gets a larger fence: the grant's
    # fence was written as a floor into the counters of every master that answered.
    others = redlock([*urls[1:], dead_url()], prefix)
    with others.lock("f", ttl=5) as later:
        assert later.fence > 101


def walk(backend: Any, direction: str, start: str | None) -> list[list[str]]:
    """The names of every page from ``start``, following ``next_after`` or ``previous_before``."""
    pages: list[list[str]] = []
    cursor = start
    while cursor is not None or not pages:
        assert len(pages) < 30, f"the {direction} walk does not end"
        page = backend.held_locks_page(limit=5, **({direction: cursor} if cursor else {}))
        assert len(page.locks) <= 5
        pages.append([held.name for held in page.locks])
        cursor = page.next_after if direction == "after" else page.previous_before
    return pages


def test_pages_both_ways_when_the_masters_list_different_names(urls: list[str]) -> None:
    """Each master's page stops at a different name; only names before every stop are merged."""
    prefix = f"rl{uuid.uuid4().hex[:8]}"
    names = [f"n:{i:02d}" for i in range(25)]
    bare = redlock([dead_url(), dead_url(), *urls[2:]], prefix)  # a bare quorum: masters 2-4
    minority = redlock([*urls[3:], dead_url()], prefix)  # leftovers on masters 3 and 4 only
    held = [bare.lock(name, ttl=60) for name in names]
    held += [minority.lock(f"n:{i:02d}x", ttl=60) for i in range(0, 25, 2)]
    for lock in held:
        assert lock.acquire(blocking=False)
    everyone = redlock(urls, prefix)
    forward = walk(everyone, "after", None)
    assert [name for page in forward for name in page] == names
    backward = walk(everyone, "before", "n:99")
    assert [name for page in reversed(backward) for name in page] == names
    # Masters 3 and 4 list leftovers too, so their pages stop sooner: pages come out short.
    assert any(len(page) < 5 for page in forward[:-1] + backward[:-1])
    with pytest.raises(InvalidArgument, match="not both"):  # not "masters failed to answer"
        everyone.held_locks(after="n:01", before="n:09")
    with pytest.raises(InvalidArgument, match="before"):
        everyone.held_locks(before="")
    for lock in held:
        lock.release()


def test_waiter_wakes_on_release_without_polling(
    urls: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Without the push the waiter would block until its 8 s timeout: one block may last 9 s
    # here (2 s in the library) and a pushed wake-up outlives a stall of a loaded machine.
    monkeypatch.setattr(redlock_lock, "MAX_BLOCK", 9.0)
    monkeypatch.setattr(mutex, "SIGNAL_MS", 10_000)
    backend = redlock(urls)
    holder = backend.lock("wake", ttl=10)
    holder.acquire()
    woke: list[float] = []

    def wait() -> None:
        waiter = backend.lock("wake", ttl=10)
        if waiter.acquire(timeout=8):
            woke.append(time.monotonic())
            waiter.release()

    thread = threading.Thread(target=wait)
    thread.start()
    deadline = time.monotonic() + 10
    while not all(m.client.hexists(holder._key, "w") for m in backend.masters):
        assert time.monotonic() < deadline, "the waiter never marked the hold"
        time.sleep(0.01)
    time.sleep(0.1)  # most likely blocked on a wake-up list by now (if not, the push waits)
    released = time.monotonic()
    holder.release()
    thread.join(15)
    assert woke and woke[0] - released < 2.0  # the holder's TTL is 10 s: no wait for expiry


def test_watchdog_renews_by_quorum_and_reports_loss(urls: list[str]) -> None:
    backend = redlock(urls, DEFAULT_TTL=2.0)  # renewals every 2/3 s: 4/3 s of slack
    lost: list[str] = []

    def on_lost(sender: Any, name: str, **kwargs: Any) -> None:
        lost.append(name)

    signals.lock_lost.connect(on_lost)
    try:
        lock = backend.lock("renewed")  # no ttl: the watchdog renews it
        lock.acquire()
        time.sleep(3.0)  # one and a half TTLs
        lock.ensure_held()
        assert backend.force_release("renewed")
        deadline = time.monotonic() + 5
        while not lost and time.monotonic() < deadline:
            time.sleep(0.05)
        assert lost == ["renewed"]
        with pytest.raises(LockLost):
            lock.release()
    finally:
        signals.lock_lost.disconnect(on_lost)


def test_paused_holder_is_refused_once_validity_ran_out(urls: list[str]) -> None:
    backend = redlock(urls)
    lock = backend.lock("short", ttl=0.3)
    lock.acquire()
    time.sleep(0.4)
    assert not lock.owned()
    newer = backend.lock("short", ttl=5)
    assert newer.acquire(blocking=False) and newer.fence > lock.fence
    with pytest.raises(LockLost):
        lock.ensure_held()
    newer.release()


def test_async_twins(urls: list[str]) -> None:
    backend = redlock(urls)

    async def scenario() -> tuple[bool, bool]:
        lock = backend.lock("async", ttl=5)
        async with lock:
            await lock.extend_async(3)
            await lock.ensure_held_async()
            inside = await lock.locked_async()
        return inside, await lock.locked_async()

    assert asyncio.run(scenario()) == (True, False)


def test_unsupported_kinds_and_bad_ttls_are_refused(urls: list[str]) -> None:
    backend = redlock(urls, MAX_TTL=10.0)
    assert not backend.supports_reentrant and not backend.supports_read_write
    with pytest.raises(InvalidArgument, match="reentrant"):
        backend.lock("x", reentrant=True)
    with pytest.raises(NotImplementedError):
        backend.read_write_lock("x")
    with pytest.raises(InvalidArgument, match="MAX_TTL"):
        backend.lock("x", ttl=11)


def test_location_must_list_three_distinct_masters() -> None:
    errors = RedlockBackend.location_errors
    assert errors({"LOCATION": "redis://a/0"})[0].startswith("LOCATION of a Redlock alias")
    assert errors({"LOCATION": ["redis://a/0", "redis://b/0"]})
    assert errors({"LOCATION": ["redis://a/0", "redis://b/0", "cache://default"]}) == [
        "Redlock master 'cache://default' must be a redis://, rediss:// or unix:// URL"
    ]
    assert errors({"LOCATION": ["redis://a/0", "redis://a/0", "redis://b/0"]}) == [
        "LOCATION lists the same Redlock master twice"
    ]
    assert errors({"LOCATION": ["redis://a/0", "redis://b/0", "redis://c/0"]}) == []
    with pytest.raises(ConfigurationError, match="CLOCK_DRIFT_FACTOR"):
        RedlockBackend("q", {"LOCATION": ["redis://a/0"] * 3, "OPTIONS": {"CLOCK_DRIFT_FACTOR": 2}})
    four = redlock(["redis://a/0", "redis://b/0", "redis://c/0", "redis://d/0"])
    assert [m.id for m in four.check()] == ["redislock.W003"]


def test_a_restarted_master_is_quarantined_for_max_ttl() -> None:
    backend = redlock(["redis://a/0", "redis://b/0", "redis://c/0"], MAX_TTL=30.0)
    master: Master = backend.masters[0]
    now = time.monotonic()
    master.seen("run-1", uptime=5, now=now)
    assert master.counts()  # QUARANTINE_FRESH_MASTERS is off here
    master.seen("run-1", uptime=6, now=now)
    assert master.counts()
    master.seen("run-2", uptime=0, now=now)
    assert not master.counts() and master.counted_from == pytest.approx(now + 30)
    fresh = redlock(["redis://a/0", "redis://b/0", "redis://c/0"], MAX_TTL=30.0)
    fresh.options["QUARANTINE_FRESH_MASTERS"] = True
    fresh.masters[0].seen("run-9", uptime=10, now=now)
    assert fresh.masters[0].counted_from == pytest.approx(now + 20)


def test_decorator_commands_and_listing_on_a_quorum_alias(urls: list[str]) -> None:
    prefix = f"rl{uuid.uuid4().hex[:8]}"
    alias = {
        "BACKEND": "django_redislock.backends.redlock.RedlockBackend",
        "LOCATION": urls,
        "KEY_PREFIX": prefix,
        "OPTIONS": {"QUARANTINE_FRESH_MASTERS": False, "MASTER_TIMEOUT": MASTER_TIMEOUT},
    }
    with override_settings(REDISLOCK_LOCKS={"default": {"LOCATION": urls[0]}, "quorum": alias}):
        total = {"n": 0}

        # 4 threads take turns 40 times: a long timeout, so a waiter passed over on a loaded
        # machine still gets its turn (the count proves the exclusion, not the speed)
        @distributed_lock("job:{n}", using="quorum", ttl=5, timeout=30)
        def bump(n: int) -> None:
            value = total["n"]
            time.sleep(0.001)
            total["n"] = value + 1

        threads = [threading.Thread(target=lambda: [bump(1) for _ in range(10)]) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        assert total["n"] == 40
        held = locks["quorum"].lock("listed", ttl=5)
        held.acquire()
        out = io.StringIO()
        call_command("list_locks", "--using", "quorum", "--json", stdout=out)
        listed = json.loads(out.getvalue())
        assert [row["name"] for row in listed["locks"]] == ["listed"]
        call_command("release_lock", "listed", "--using", "quorum", "--yes", stdout=io.StringIO())
        assert not held.owned()
        locks.reset()


def test_system_checks_of_a_redlock_alias() -> None:
    from django.core import checks

    backend = "django_redislock.backends.redlock.RedlockBackend"
    four = ["redis://a/0", "redis://b/0", "redis://c/0", "redis://d/0"]
    aliases = {
        "default": {"LOCATION": "redis://x/0"},
        "bad": {"BACKEND": backend, "LOCATION": "redis://a/0"},
        "even": {"BACKEND": backend, "LOCATION": four},
    }
    with override_settings(REDISLOCK_LOCKS=aliases):
        found = [(m.id, m.msg.split(":")[0]) for m in checks.run_checks(tags=["redislock"])]
    locks.reset()
    assert ("redislock.E005", "REDISLOCK_LOCKS['bad']") in found
    assert [m for m in found if m[0] == "redislock.W003"] == [
        (
            "redislock.W003",
            "REDISLOCK_LOCKS['even'] lists 4 Redlock masters; a quorum of 3 "
            "tolerates as many failures as 3 masters would.",
        )
    ]


def test_masters_on_unix_sockets(redlock_servers: list[RedisProcess]) -> None:
    backend = redlock([f"unix://{server.socket_path}?db=0" for server in redlock_servers])
    with backend.lock("over-unix", ttl=5) as lock:
        assert lock.fence > 0 and backend.ping()


def test_a_master_that_refuses_info_still_serves_locks(
    redlock_servers: list[RedisProcess], caplog: pytest.LogCaptureFixture
) -> None:
    admin = redlock_servers[0].client()
    admin.acl_setuser(
        "noinfo", enabled=True, passwords=["+pw"], keys=["*"], commands=["+@all", "-info"]
    )
    try:
        urls = [f"redis://noinfo:pw@127.0.0.1:{s.port}/0" for s in redlock_servers[:1]]
        backend = redlock(urls + [s.url for s in redlock_servers[1:]])
        with caplog.at_level("WARNING", "django_redislock.redlock"), backend.lock("acl", ttl=5):
            pass
        assert "refused INFO" in caplog.text and ":pw@" not in caplog.text  # redacted
    finally:
        admin.acl_deluser("noinfo")


def test_a_refused_attempt_never_releases_the_holder_with_the_same_explicit_owner(
    urls: list[str],
) -> None:
    backend = redlock(urls)
    first = backend.lock("job", ttl=5, owner="celery-task-7")
    assert first.acquire(blocking=False)
    again = backend.lock("job", ttl=5, owner="celery-task-7")  # e.g. a retried task
    assert again.acquire(blocking=False) is False
    assert first.owned()
    backend.lock("job", owner="celery-task-7").release()  # released elsewhere, by owner
    assert not first.locked()


def test_close_drops_clients_and_threads_and_the_backend_still_works(urls: list[str]) -> None:
    backend = redlock(urls)
    with backend.lock("before-close", ttl=5):
        pass
    backend.close()
    assert backend._pool is None and all(m._client is None for m in backend.masters)
    with backend.lock("after-close", ttl=5) as lock:
        assert lock.fence > 0


def test_a_redlock_lock_reaches_its_masters_through_its_typed_redlock_attribute() -> None:
    backend = redlock([dead_url(), dead_url(), dead_url()])
    lock = backend.lock("typed")
    assert lock.redlock is backend
    alias: object = lock.backend
    assert alias is backend  # the signals, the watchdog and the listings see the alias


def test_a_redlock_lock_on_a_single_server_alias_is_refused_when_built() -> None:
    from django_redislock.backends.redis import RedisLockBackend
    from django_redislock.redlock.lock import RedlockLock

    single = RedisLockBackend("single", {"LOCATION": dead_url()})
    with pytest.raises(TypeError, match="has no masters, quorum, each, each_async"):
        RedlockLock(single, "x")  # type: ignore[arg-type]
