"""Each form of call under the fault proxy, where no operation's fault test covers it.

The operations' fault tests (``tests/test_locks_faults.py``, ``tests/test_queue_faults.py``,
...) check what a lost, stalled or cut reply leaves in Redis. These check the call layer's
side for the forms they leave out: a call that failed leaves no connection whose late reply
a later command would read (the next command gets its own reply), and errors come out as
redis-py's (or, through a node, as ``ConnectionFailed``). See docs/calls.md, "Fault points".
The last ones need no proxy: an asyncio connection closed under its send by another coroutine
(redis-py's writer race, ``tests/writer_race.py``).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
import redis

from django_redislock.calls.batch import run_batch
from django_redislock.calls.direct import direct_pool, direct_sender
from django_redislock.calls.script import ASYNC_RESENDS, script
from django_redislock.calls.wait import wait_on
from django_redislock.exceptions import ConnectionFailed

from .conftest import RedisTarget, make_queue
from .faults import Args, Fault, command_name
from .proxied import PROXY_SOCKET_TIMEOUT, ProxiedTarget, no_resend_options
from .writer_race import closed_under_send, evalsha_of

#: A read-only script of the app: a hold check of a lock that does not exist (answers -2).
CHECK = "lock_extend"
SCRIPT_COMMANDS = (b"EVALSHA", b"EVAL")


def script_on(needle: str) -> Any:
    def match(args: Args) -> bool:
        return command_name(args) in SCRIPT_COMMANDS and any(needle.encode() in a for a in args)

    return match


def check_call(backend: Any, name: str) -> tuple[list[str], list[Any]]:
    return [backend.key(name, "lock"), backend.key(name, "expiry")], ["nobody", 1, 0, name]


def own_reply(backend: Any, name: str) -> None:
    """The next commands on the client's pool read their own replies."""
    key = backend.key(name, "own")
    assert backend.client.set(key, "mine") is True
    assert backend.client.get(key) == b"mine"


def arm(target: ProxiedTarget, fault: str, match: Any) -> list[Fault]:
    if fault == "stall":
        return target.stall_on(PROXY_SOCKET_TIMEOUT * 4, match)
    if fault == "cut":
        return target.cut_mid_reply(match)
    return target.drop_reply(match, then="silent")


@pytest.mark.parametrize("fault", ["stall", "cut"])
@pytest.mark.parametrize("kind", ["single", "cluster"])
def test_a_script_run_that_failed_leaves_no_stale_reply(
    kind: str, fault: str, request: pytest.FixtureRequest
) -> None:
    target: ProxiedTarget = request.getfixturevalue(f"proxied_{kind}")
    backend = target.lock_backend(**no_resend_options(kind))
    keys, args = check_call(backend, "run")
    assert script(CHECK).run(backend.client, keys, args) == -2  # loaded, connection open
    faults = arm(target, fault, script_on("run"))
    with pytest.raises(redis.RedisError):
        script(CHECK).run(backend.client, keys, args)
    target.clear()  # a stalled reply goes through now, on whatever connection it waited
    assert any(f.fired.is_set() for f in faults)
    time.sleep(0.05)
    own_reply(backend, "run")


@pytest.mark.parametrize("fault", ["stall", "cut"])
@pytest.mark.parametrize("kind", ["single", "cluster"])
def test_a_batch_that_failed_leaves_no_stale_reply(
    kind: str, fault: str, request: pytest.FixtureRequest
) -> None:
    target: ProxiedTarget = request.getfixturevalue(f"proxied_{kind}")
    backend = target.lock_backend(**no_resend_options(kind))
    calls = [(CHECK, *check_call(backend, name)) for name in ("bat1", "bat2")]
    assert run_batch(backend.client, calls) == [-2, -2]
    faults = arm(target, fault, script_on("bat2"))
    with pytest.raises(redis.RedisError):
        run_batch(backend.client, calls)
    target.clear()
    assert any(f.fired.is_set() for f in faults)
    time.sleep(0.05)
    own_reply(backend, "bat1")
    assert run_batch(backend.client, calls) == [-2, -2]


@pytest.mark.parametrize("fault", ["lost", "stall", "cut"])
def test_a_direct_send_that_failed_drops_the_threads_kept_connection(
    proxied_single: ProxiedTarget, fault: str
) -> None:
    """A hot call's reply lost, held or cut: the thread's kept connection is not reused.

    The direct sender keeps one connection per thread and pool. Reused after a lost or held
    reply, the next hot call would read the late reply (or nothing, on a silent connection).
    """
    backend = proxied_single.lock_backend(**no_resend_options("single"))
    assert direct_pool(backend.client) is not None  # the single server's calls go direct
    keys, args = check_call(backend, "direct")
    prepared = script(CHECK).prepare(backend.client, keys)
    assert prepared.sender is not None
    echo = direct_sender(backend.client, ("ECHO",))
    assert echo is not None
    assert prepared(args) == -2 and echo.call(["warm"]) == b"warm"  # a connection is kept
    faults = arm(proxied_single, fault, script_on("direct"))
    with pytest.raises(redis.RedisError):
        prepared(args)
    proxied_single.clear()
    assert any(f.fired.is_set() for f in faults)
    time.sleep(0.05)
    assert echo.call(["mine"]) == b"mine"
    assert prepared(args) == -2


@pytest.mark.parametrize("kind", ["single", "cluster"])
def test_a_wait_whose_reply_is_lost_ends_at_its_deadline(
    kind: str, request: pytest.FixtureRequest
) -> None:
    """The ``BLPOP`` pops a push on the server and its reply never comes: the deadline holds."""
    target: ProxiedTarget = request.getfixturevalue(f"proxied_{kind}")
    backend = target.lock_backend()
    key = backend.key("lost", "signal")
    own_reply(backend, "lost")
    faults = target.drop_reply("BLPOP", then="silent")
    target.raw().rpush(key, "go")
    start = time.monotonic()
    assert wait_on(backend, [key], 0.3) is None
    took = time.monotonic() - start
    target.clear()
    assert any(f.fired.is_set() for f in faults)
    assert took >= 0.3, took  # it waited; a socket timeout (0.5 s) would end it as an error
    assert target.raw().llen(key) == 0  # the server popped it: the reply was the one lost
    own_reply(backend, "lost")


@pytest.mark.parametrize("fault", ["lost", "stall", "cut"])
@pytest.mark.parametrize("kind", ["single", "cluster"])
def test_an_asyncio_script_call_that_failed_leaves_no_stale_reply(
    kind: str, fault: str, request: pytest.FixtureRequest
) -> None:
    target: ProxiedTarget = request.getfixturevalue(f"proxied_{kind}")
    backend = target.lock_backend(**no_resend_options(kind))
    keys, args = check_call(backend, "arun")
    own = backend.key("arun", "own")

    async def main() -> tuple[Any, BaseException | None, Any, Any]:
        client = backend.async_client()
        first = await script(CHECK).run_async(client, keys, args)
        faults = arm(target, fault, script_on("arun"))
        error: BaseException | None = None
        try:
            await asyncio.wait_for(script(CHECK).run_async(client, keys, args), 5)
        except (redis.RedisError, asyncio.TimeoutError) as exc:
            error = exc
        target.clear()
        assert any(f.fired.is_set() for f in faults)
        await asyncio.sleep(0.05)
        written = await client.set(own, "mine")
        read = await client.get(own)
        await client.aclose()
        return first, error, written, read

    first, error, written, read = asyncio.run(main())
    assert first == -2
    assert isinstance(error, redis.RedisError), error
    assert (written, read) == (True, b"mine")


@pytest.mark.parametrize("kind", ["single", "cluster"])
def test_an_asyncio_call_whose_connection_closed_under_its_send_is_sent_again(
    kind: str, request: pytest.FixtureRequest
) -> None:
    """redis-py's writer race: another coroutine's ``disconnect()`` leaves the connection's
    writer None between redis-py's check and its write, which raises ``AttributeError``
    (redis-py issues #3546, #4287). Nothing was written: the call goes out again, as after a
    dropped connection, and runs once (a second run of the enqueue would answer False)."""
    target: RedisTarget = request.getfixturevalue(f"{kind}_target")
    q = make_queue(target)

    async def main() -> tuple[bool, list[bytes]]:
        assert await q.enqueue_async("warm") is True  # loaded, a connection open
        with closed_under_send(evalsha_of("queue_enqueue")) as hit:
            queued = await q.enqueue_async("raced")
        return queued, hit

    queued, hit = asyncio.run(main())
    assert (queued, len(hit)) == (True, 1)
    assert sorted(task.id for task in q.claim(5).tasks) == ["raced", "warm"]


@pytest.mark.parametrize("kind", ["single", "cluster"])
def test_an_asyncio_call_whose_connection_keeps_closing_fails_as_an_outage(
    kind: str, request: pytest.FixtureRequest
) -> None:
    """Every send raced: the call ends as a dropped connection would, with
    ``ConnectionFailed`` naming the setting (a worker's outage handling), not ``AttributeError``."""
    target: RedisTarget = request.getfixturevalue(f"{kind}_target")
    q = make_queue(target)

    async def main() -> tuple[BaseException | None, int]:
        assert await q.enqueue_async("warm") is True
        error: BaseException | None = None
        with closed_under_send(evalsha_of("queue_enqueue"), times=1000) as hit:
            try:
                await q.enqueue_async("raced")
            except Exception as exc:
                error = exc
        return error, len(hit)

    error, sends = asyncio.run(main())
    assert isinstance(error, ConnectionFailed), repr(error)
    assert isinstance(error.__cause__, redis.ConnectionError)
    assert sends == 1 + ASYNC_RESENDS
    assert [task.id for task in q.claim(5).tasks] == ["warm"]


def test_an_attribute_error_that_is_not_redis_pys_is_raised_as_it_is() -> None:
    """Only an error raised by redis-py's connection code (or the transport under it) is a
    closed connection: anything else (a bug, a client class of the user's) is not resent."""

    class Broken:
        calls = 0

        async def execute_command(self, *args: Any) -> Any:
            Broken.calls += 1
            raise AttributeError("'NoneType' object has no attribute 'writelines'")

    with pytest.raises(AttributeError):
        asyncio.run(script(CHECK).run_async(Broken(), ["a"], []))  # type: ignore[arg-type]
    assert Broken.calls == 1
