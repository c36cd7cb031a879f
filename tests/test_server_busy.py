"""A server busy running a long script answers ``-BUSY``: an outage, not a crash.

Past ``busy-reply-threshold`` a server that runs a long Lua script (someone else's, an
admin's) answers every other command with ``BUSY`` until the script ends or is killed. The
command did not run. redis-py raises that as a plain ``ResponseError``; the app turns it
into :class:`~django_redislock.exceptions.ConnectionFailed`, as it does for ``CLUSTERDOWN``,
so a view answers as for an unreachable server and a worker rides it out, and nothing is
left behind in Redis. The busy script runs on a private server of this module, ended by
``SCRIPT KILL`` whatever happens.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from django_redislock.backends.redis import RedisLockBackend, RedisQueueBackend
from django_redislock.exceptions import ConnectionFailed

from .servers import RedisProcess

#: Generous: the busy threshold is 100 ms, but a loaded machine starts threads late.
DEADLINE = 30.0
#: Runs until ``SCRIPT KILL``: a read-only loop, which the server lets be killed.
SPIN = "local i = 0 while true do i = i + 1 end"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisProcess]:
    directory: Path = tmp_path_factory.mktemp("redis-busy")
    process = RedisProcess(directory, extra=["--busy-reply-threshold", "100"]).start()
    yield process
    process.stop()


def answers_busy(client: redis.Redis) -> bool:
    try:
        client.ping()
    except redis.ResponseError as exc:
        return str(exc).startswith("BUSY")
    return False


@contextlib.contextmanager
def busy(server: RedisProcess) -> Iterator[None]:
    """The server runs a script that spins until killed; answers BUSY inside the block."""
    spinner = server.client(socket_timeout=DEADLINE + 30)
    ended = threading.Event()

    def spin() -> None:
        with contextlib.suppress(redis.RedisError):
            spinner.eval(SPIN, 0)
        ended.set()

    thread = threading.Thread(target=spin, daemon=True)
    thread.start()
    probe = server.client(socket_timeout=DEADLINE)
    try:
        deadline = time.monotonic() + DEADLINE
        while not answers_busy(probe):
            assert time.monotonic() < deadline, "the server never answered BUSY"
            time.sleep(0.05)
        yield
    finally:
        deadline = time.monotonic() + DEADLINE
        while not ended.is_set() and time.monotonic() < deadline:
            with contextlib.suppress(redis.ResponseError):  # NOTBUSY: not started or over
                probe.script_kill()
            ended.wait(0.1)
        thread.join(DEADLINE)
        assert ended.is_set(), "the busy script was not killed"
        spinner.close()
        probe.close()


def params(server: RedisProcess) -> dict[str, object]:
    return {"LOCATION": server.url, "KEY_PREFIX": "busy", "OPTIONS": {"SOCKET_TIMEOUT": 5.0}}


def test_a_lock_call_on_a_busy_server_fails_as_an_outage_and_leaves_nothing(
    server: RedisProcess,
) -> None:
    locks = RedisLockBackend("busy", params(server))
    lock = locks.lock("report", ttl=5.0)
    assert lock.acquire(blocking=False)  # the scripts are loaded: BUSY, not NOSCRIPT
    lock.release()
    raw = server.client()
    before = sorted(raw.keys("*"))
    with busy(server):
        with pytest.raises(ConnectionFailed, match="BUSY"):
            lock.acquire(blocking=False)
        with pytest.raises(ConnectionFailed, match="BUSY"):
            asyncio.run(lock.acquire_async(blocking=False))
        assert not lock.held_by_me()
    assert not locks.lock("report", ttl=5.0).locked()
    assert sorted(raw.keys("*")) == before  # the acquire (and its take-back) ran nothing
    assert lock.acquire(blocking=False)  # and the server, no longer busy, answers as ever
    lock.release()


def test_an_enqueue_on_a_busy_server_fails_as_an_outage(server: RedisProcess) -> None:
    queue = RedisQueueBackend("busy", params(server)).queue("jobs")
    assert queue.enqueue("first", {"n": 1})
    with busy(server):
        with pytest.raises(ConnectionFailed, match="BUSY"):
            queue.enqueue("second", {"n": 2})
        with pytest.raises(ConnectionFailed, match="BUSY"):
            queue.pop()
    assert [task.id for task in queue.pop(count=5)] == ["first"]
