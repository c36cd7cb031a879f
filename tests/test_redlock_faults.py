"""Redlock under faults: real masters stopped, restarted empty and started again.

Each test starts its own 5 masters (the session's set is shared by the fast
tests), and every loop is bounded in count and time.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from django_redislock.exceptions import ConnectionFailed

from .servers import RedisProcess
from .test_redlock import redlock

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow


@pytest.fixture
def masters(tmp_path: Path) -> Iterator[list[RedisProcess]]:
    servers = [RedisProcess(tmp_path / f"master{i}").start() for i in range(5)]
    yield servers
    for server in servers:
        server.stop()


def restart_empty(server: RedisProcess) -> None:
    """Stop a master and start a new one on the same port with no data (no persistence)."""
    server.stop()
    server.start()


def test_two_of_five_stopped_still_grant_exclusive_locks(masters: list[RedisProcess]) -> None:
    backend = redlock([m.url for m in masters])
    masters[3].stop()
    masters[4].stop()
    total = {"n": 0, "inside": 0, "overlaps": 0}

    def work() -> None:
        for _ in range(25):
            with backend.lock("shared", ttl=5, timeout=20):
                total["inside"] += 1
                total["overlaps"] += total["inside"] > 1
                value = total["n"]
                time.sleep(0.001)
                total["n"] = value + 1
                total["inside"] -= 1

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert (total["n"], total["overlaps"]) == (100, 0)


def test_three_of_five_stopped_fail_cleanly_within_the_timeout(
    masters: list[RedisProcess],
) -> None:
    backend = redlock([m.url for m in masters])
    for server in masters[2:]:
        server.stop()
    started = time.monotonic()
    with pytest.raises(ConnectionFailed, match="only 2 of 5"):
        backend.lock("x", ttl=5).acquire(timeout=1.0)
    # the timeout, plus one last attempt (not DEFAULT_TIMEOUT, 10 s); slack for a loaded machine
    assert 1.0 <= time.monotonic() - started < 8.0
    started = time.monotonic()
    lock = backend.lock("x", ttl=5)
    with pytest.raises(ConnectionFailed):
        lock.acquire(blocking=False)
    assert time.monotonic() - started < 8.0  # one attempt, not DEFAULT_TIMEOUT's 10 s of them
    client = backend.masters[0].client
    # the failed attempts left no hold, and no live entry in the admin index
    assert client.exists(lock._key) == 0 and client.zcount(lock._index.expiry, 1, "+inf") == 0


def test_a_master_restarted_empty_does_not_count(masters: list[RedisProcess]) -> None:
    # MAX_TTL (the quarantine, and the holder's TTL) must outlast three server restarts and
    # three attempts below on a loaded machine: 5 s.
    max_ttl = 5.0
    urls = [m.url for m in masters]
    observer = redlock(urls, "fault", MAX_TTL=max_ttl)
    observer.masters[0].client.ping()  # this process has seen master 0's first run id
    masters[3].stop()
    masters[4].stop()
    holder = redlock(urls, "fault", MAX_TTL=max_ttl).lock("r", ttl=max_ttl)
    assert holder.acquire(blocking=False)  # held on masters 0, 1, 2
    restart_empty(masters[0])  # ... and master 0 forgets it
    masters[3].start()
    masters[4].start()
    assert observer.lock("r", ttl=max_ttl).acquire(blocking=False) is False
    assert not observer.masters[0].counts()
    cautious = redlock(urls, "fault", MAX_TTL=max_ttl, QUARANTINE_FRESH_MASTERS=True)
    assert cautious.lock("r", ttl=max_ttl).acquire(blocking=False) is False
    # Without the run-id rule a client gets a second hold on masters 0, 3 and 4: the hazard.
    naive = redlock(urls, "fault", MAX_TTL=max_ttl).lock("r", ttl=max_ttl)
    assert naive.acquire(blocking=False) is True
    assert time.monotonic() < holder._valid_until  # while the first grant is still valid
    naive.release()
    # MAX_TTL after the restart was seen, master 0 counts again (the holder's TTL is over too)
    deadline = time.monotonic() + max_ttl + 5
    while not observer.masters[0].counts():
        assert time.monotonic() < deadline, "master 0 stays out of the quorum"
        time.sleep(0.05)
    with observer.lock("r", ttl=max_ttl, timeout=5) as later:
        assert observer.masters[0].counts() and later.fence > holder.fence


def worker(**args: Any) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.fault_worker", "redlock-count", json.dumps(args)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )


def test_mutual_exclusion_of_4_processes_while_masters_stop_and_restart(
    masters: list[RedisProcess], tmp_path: Path
) -> None:
    counter, log = tmp_path / "counter", tmp_path / "fences"
    counter.write_text("0")
    # A hold lasts 2 s, so a worker stalled inside it on a loaded machine still finishes its
    # read-modify-write in time; MAX_TTL (the quarantine of a restarted master) is as long.
    options = {"MAX_TTL": 2.0, "MASTER_TIMEOUT": 0.3}
    common = {"urls": [m.url for m in masters], "options": options, "ttl": 2.0, "hold": 0.005}
    procs = [
        worker(**common, counter=str(counter), log=str(log), n=100, deadline=60) for _ in range(4)
    ]
    faults = 0
    deadline = time.monotonic() + 60
    while any(p.poll() is None for p in procs) and time.monotonic() < deadline:
        victim = masters[faults % 5]
        victim.stop()  # one master down, and at times one or two still in quarantine
        time.sleep(0.3)
        victim.start()  # restarted empty: every client leaves it out for MAX_TTL
        faults += 1
        # Up for 0.9 s: with 0.3 s down that is over (MAX_TTL + 0.3 s) / 2 between restarts,
        # so at most two of the five are out at any time and three still make a quorum.
        time.sleep(0.9)
    results = [json.loads(p.communicate(timeout=30)[0].splitlines()[-1]) for p in procs]
    done = sum(r["done"] for r in results)
    fences = [int(line) for line in log.read_text().split()]
    errors = {name for r in results for name in r["errors"]}
    print(f"\nredlock chaos: {faults} master restarts, {done} grants, errors {errors}")
    assert done == 400 and int(counter.read_text()) == 400 and faults >= 3
    assert fences == sorted(fences) and len(set(fences)) == len(fences)
    assert errors <= {"ConnectionFailed", "not acquired"}


def test_a_hold_outlives_the_loss_of_a_minority(masters: list[RedisProcess]) -> None:
    backend = redlock([m.url for m in masters])
    lock = backend.lock("held", ttl=5)
    assert lock.acquire(blocking=False)
    masters[3].kill()
    masters[4].kill()
    lock.ensure_held()
    lock.extend(5)  # renewed on the 3 that are left: still a quorum
    assert [held.name for held in backend.held_locks()] == ["held"]
    lock.release()  # no LockLost: a quorum released it
    masters[2].kill()
    with pytest.raises(ConnectionFailed):
        backend.lock("held", ttl=5).acquire(blocking=False)
