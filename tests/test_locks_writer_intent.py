"""A waiting writer's intent leaves with it (issue 23, item 6).

A writer that must wait leaves an intent that refuses new readers. It is taken
away when the writer stops waiting (cancelled, timed out) and, for a writer
killed while waiting, ends within one wake-up period (``WRITER_BLOCK``), not
0.8 x ``SOCKET_TIMEOUT`` later. A second writer behind an intent whose owner
is gone blocks on the wake-up list until the intent ends instead of spinning.
Assertions are on states and counts; the deadlines are generous.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
import uuid
from typing import Any

import pytest

from django_redislock.locking.readwrite import ReadWriteLock

from .conftest import RedisTarget

#: A large socket timeout: before the fix, an intent lived 0.8 x this long after its writer.
SOCKET_TIMEOUT = 30.0


def _rw(target: RedisTarget) -> ReadWriteLock:
    backend = target.lock_backend(SOCKET_TIMEOUT=SOCKET_TIMEOUT)
    return ReadWriteLock(backend, f"intent:{uuid.uuid4().hex[:10]}")


def _until(check: Any, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.005)
    return bool(check())


@pytest.mark.parametrize("where", ["single", "cluster"])
def test_a_cancelled_waiting_writer_takes_its_intent_away(
    request: pytest.FixtureRequest, where: str
) -> None:
    rw = _rw(request.getfixturevalue(f"{where}_target"))
    reader = rw.read(ttl=30)
    assert reader.acquire(blocking=False)

    async def run() -> None:
        writer = rw.write(ttl=30)
        task = asyncio.ensure_future(writer.acquire_async(timeout=20))
        deadline = time.monotonic() + 10
        while not (await rw.state_async())["writer_waiting"] and time.monotonic() < deadline:
            await asyncio.sleep(0.005)
        assert (await rw.state_async())["writer_waiting"], "the writer never waited"
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(run())
    assert rw.state() == {"writer": False, "readers": 1, "writer_waiting": False}
    assert rw.read(ttl=5).acquire(blocking=False), "a new reader is still refused"
    reader.release()


@pytest.mark.parametrize("where", ["single", "cluster"])
def test_a_timed_out_writer_takes_its_intent_away(
    request: pytest.FixtureRequest, where: str
) -> None:
    rw = _rw(request.getfixturevalue(f"{where}_target"))
    reader = rw.read(ttl=30)
    assert reader.acquire(blocking=False)
    assert not rw.write(ttl=30).acquire(timeout=0.3)
    assert rw.state() == {"writer": False, "readers": 1, "writer_waiting": False}
    assert rw.read(ttl=5).acquire(blocking=False), "a new reader is still refused"
    reader.release()


WRITER = """
import sys, time
from django.conf import settings
settings.configure(INSTALLED_APPS=[], REDISLOCK_LOCKS={})
from django_redislock.backends.redis import RedisLockBackend
from django_redislock.locking.readwrite import ReadWriteLock
backend = RedisLockBackend("w", {"LOCATION": sys.argv[1], "OPTIONS": {"SOCKET_TIMEOUT": 30.0}})
ReadWriteLock(backend, sys.argv[2]).write(ttl=30).acquire(timeout=60)
"""


def test_readers_are_admitted_soon_after_a_waiting_writer_is_killed(
    single_target: RedisTarget,
) -> None:
    rw = _rw(single_target)
    reader = rw.read(ttl=30)
    assert reader.acquire(blocking=False)
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, single_target.location, rw.name], env=env
    )
    try:
        assert _until(lambda: rw.state()["writer_waiting"], 30), "the writer never waited"
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
    # Before the fix, the intent outlived the writer by up to 0.8 x SOCKET_TIMEOUT (24 s).
    assert rw.read(ttl=5).acquire(timeout=10), "readers stayed refused after the writer died"
    reader.release()


def _commands(raw: Any) -> dict[str, int]:
    stats = raw.info("commandstats")
    return {k: int(v["calls"]) for k, v in stats.items() if k != "cmdstat_info"}


def test_a_writer_behind_a_vanished_writer_waits_without_spinning(
    single_target: RedisTarget,
) -> None:
    """The lock is free but another writer's intent is up and nobody renews it (its writer
    was killed): the second writer waits for the intent to end with a few commands."""
    rw = _rw(single_target)
    raw = single_target.raw
    raw.set(rw.keys.intent, "gone-writer", px=1000)
    before = _commands(raw)
    writer = rw.write(ttl=5)
    assert writer.acquire(timeout=10)
    after = _commands(raw)
    counts = {k: n - before.get(k, 0) for k, n in after.items() if n != before.get(k, 0)}
    # the commands the client sent (commandstats also counts those a script runs)
    sent = counts.get("cmdstat_evalsha", 0) + counts.get("cmdstat_blpop", 0)
    writer.release()
    # a try and a wait per wake-up period at most; before the fix, thousands of tries
    assert sent <= 20, f"the second writer sent {sent} commands while waiting: {counts}"
