"""The call layer's blocking wait (``calls.wait``): deadline, cancellation, faults, slots."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from django_redislock.calls import wait as wait_module
from django_redislock.calls.wait import MIN_WAIT, wait_on, wait_on_async
from django_redislock.exceptions import ConnectionFailed, InvalidArgument
from django_redislock.queue.worker import Worker

from .conftest import RedisTarget
from .processes import wait_for
from .proxied import ProxiedTarget

#: The server-side slack of every wait in this module: a wait that only the server's own
#: timeout ended would end this much after its deadline.
SLACK = 5.0

#: How late a wait may end and still count as ended by the client's deadline: well short of
#: SLACK, and long enough for a loaded machine to schedule the waiting thread or loop late
#: (a bound of 0.15 s failed on busy CI runners). The wait's other checks are elsewhere: a
#: later push stays in the list, the next command reads its own reply, and behind a silent
#: proxy a server-kept deadline would end in an error at the socket timeout.
LATE = 4.0


@pytest.fixture(autouse=True)
def long_server_slack(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(wait_module, "SERVER_SLACK", SLACK)


@pytest.fixture(params=["single", "cluster"])
def target(request: pytest.FixtureRequest) -> RedisTarget:
    found: RedisTarget = request.getfixturevalue(f"{request.param}_target")
    return found


def push_later(raw: Any, key: str, value: str, seconds: float) -> threading.Thread:
    def push() -> None:
        time.sleep(seconds)
        raw.rpush(key, value)

    thread = threading.Thread(target=push, daemon=True)
    thread.start()
    return thread


def test_a_push_ends_the_wait_with_what_it_popped(redis_target: RedisTarget) -> None:
    backend = redis_target.lock_backend()
    key = backend.key("w", "signal")
    pusher = push_later(redis_target.raw, key, "go", 0.1)
    start = time.monotonic()
    popped = wait_on(backend, [key], 30.0)
    pusher.join()
    assert popped == (key.encode(), b"go")  # a deadline ends a wait with None
    assert time.monotonic() - start < 15.0
    assert redis_target.raw.llen(key) == 0


def test_a_keeping_wait_wakes_every_waiter_and_leaves_the_element(target: RedisTarget) -> None:
    # real servers only: fakeredis's BLMOVE does not wake on a push from another thread
    redis_target = target
    backend = redis_target.queue_backend()
    key = backend.key("r", "done")
    woke: list[Any] = []
    waiters = [
        threading.Thread(target=lambda: woke.append(wait_on(backend, [key], 5.0, keep=True)))
        for _ in range(3)
    ]
    for waiter in waiters:
        waiter.start()
    time.sleep(0.1)  # the waiters block (a push before a waiter blocks wakes it at once too)
    redis_target.raw.rpush(key, "token")
    for waiter in waiters:
        waiter.join(5)
    assert woke == [(key.encode(), b"token")] * 3
    assert redis_target.raw.lrange(key, 0, -1) == [b"token"]  # rotated, never taken
    with pytest.raises(InvalidArgument, match="keep=True takes one key"):
        wait_on(backend, [key, backend.key("r", "other")], 0.1, keep=True)


def test_a_keeping_asyncio_wait_ends_at_its_deadline_or_at_once_on_an_element(
    target: RedisTarget,
) -> None:
    backend = target.queue_backend()
    key = backend.key("r", "done")

    async def waits() -> tuple[Any, float, Any]:
        start = time.monotonic()
        nothing = await wait_on_async(backend, [key], 0.2, keep=True)
        took = time.monotonic() - start
        target.raw.rpush(key, "token")
        return nothing, took, await wait_on_async(backend, [key], 5.0, keep=True)

    nothing, took, found = asyncio.run(waits())
    assert nothing is None and 0.2 <= took < 0.2 + LATE, took
    assert found == (key.encode(), b"token")
    assert target.raw.llen(key) == 1


def test_a_wait_on_several_keys_of_one_slot_returns_the_pushed_one(target: RedisTarget) -> None:
    backend = target.queue_backend()
    first, second = backend.key("q", "a"), backend.key("q", "b")
    target.raw.rpush(second, "x")
    assert wait_on(backend, [first, second], 1.0) == (second.encode(), b"x")


def test_keys_of_several_slots_are_refused_on_a_cluster(cluster_target: RedisTarget) -> None:
    backend = cluster_target.queue_backend()
    keys = [backend.key("a", "signal"), backend.key("b", "signal")]
    with pytest.raises(InvalidArgument, match="one Cluster slot"):
        wait_on(backend, keys, 0.1)
    with pytest.raises(InvalidArgument, match="at least one key"):
        wait_on(backend, [], 0.1)


def test_a_wait_ends_at_its_deadline_and_leaves_a_later_push_in_the_list(
    target: RedisTarget,
) -> None:
    backend = target.lock_backend()
    key = backend.key("w", "signal")
    wait_on(backend, [backend.key("w", "warm")], 0.01)  # a connection is open
    start = time.monotonic()
    assert wait_on(backend, [key], 0.25) is None
    took = time.monotonic() - start
    assert 0.25 <= took < 0.25 + LATE, took
    # the BLPOP still blocked on the server went with its connection: nothing pops this
    target.raw.rpush(key, "late")
    time.sleep(0.05)
    assert target.raw.lrange(key, 0, -1) == [b"late"]
    assert backend.client.set(backend.key("w", "own"), "mine") is True
    assert backend.client.get(backend.key("w", "own")) == b"mine"


def test_a_cancelled_asyncio_wait_leaves_no_connection_that_reads_its_reply(
    target: RedisTarget,
) -> None:
    backend = target.lock_backend()
    key, own = backend.key("w", "signal"), backend.key("w", "own")

    async def main() -> tuple[Any, Any, list[bytes]]:
        client = backend.async_client()
        await client.set(own, "warm")  # the pool of the key's node holds a connection
        waiting = asyncio.ensure_future(wait_on_async(backend, [key], 5.0))
        await asyncio.sleep(0.2)  # the BLPOP is blocked on the server
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        # a push after the cancellation: a connection still blocked would pop it, and hand
        # the BLPOP's reply to the next command sent on it
        target.raw.rpush(key, "late")
        await asyncio.sleep(0.05)
        written = await client.set(own, "mine")
        read = await client.get(own)
        left: list[Any] = await client.lrange(key, 0, -1)
        await client.aclose()
        return written, read, left

    written, read, left = asyncio.run(main())
    assert written is True
    assert read == b"mine"
    assert left == [b"late"]


def test_an_asyncio_wait_ends_at_its_deadline_or_on_a_push(target: RedisTarget) -> None:
    backend = target.lock_backend()
    key = backend.key("w", "signal")

    async def main() -> tuple[Any, float, Any]:
        client = backend.async_client()
        start = time.monotonic()
        missed = await wait_on_async(backend, [key], 0.25)
        took = time.monotonic() - start
        target.raw.rpush(key, "go")
        popped = await wait_on_async(backend, [key], 5.0)
        await client.aclose()
        return missed, took, popped

    missed, took, popped = asyncio.run(main())
    assert missed is None
    assert 0.25 <= took < 0.25 + LATE, took
    assert popped == (key.encode(), b"go")


def blpop_timeouts(proxied: ProxiedTarget) -> list[float]:
    """The server timeout of every ``BLPOP`` that went through the proxies, in order sent.

    Waits (10 s at most) for the first one: the proxy records a request on its own thread,
    and a wait whose deadline had passed gives up after a few milliseconds, which on a
    loaded machine can be before the proxy has read what it sent.
    """

    def sent() -> list[float]:
        return [
            float(args[-1])
            for proxy in proxied.proxies
            for args in list(proxy.requests)
            if args and args[0].upper() == b"BLPOP"
        ]

    wait_for(sent, 10.0, "a BLPOP through the proxy")
    return sent()


def test_a_first_asyncio_wait_on_a_cluster_spends_its_set_up_out_of_its_deadline(
    proxied_cluster: ProxiedTarget,
) -> None:
    """The caller's deadline holds from its call, the client's first slot-map load included.

    The slot map comes back 1.5 s late; the wait was for 1 s. Its ``BLPOP`` then goes out
    with what is left of the second (none: the shortest wait), never with a fresh second
    on top of the set-up (a deadline paid after the set-up ended this wait 1 s late).
    """
    backend = proxied_cluster.lock_backend(SOCKET_TIMEOUT=5.0)
    key = backend.key("w", "signal")
    stalls = proxied_cluster.stall_on(1.5, "CLUSTER")

    async def main() -> Any:
        return await wait_on_async(backend, [key], 1.0)

    assert asyncio.run(main()) is None
    assert any(stall.fired.is_set() for stall in stalls)
    assert blpop_timeouts(proxied_cluster) == [pytest.approx(MIN_WAIT + SLACK)]


def test_a_first_wait_spends_its_connection_set_up_out_of_its_deadline(
    proxied_single: ProxiedTarget,
) -> None:
    """The same for a blocking wait whose first connection's handshake answers late."""
    backend = proxied_single.lock_backend(SOCKET_TIMEOUT=5.0)
    key = backend.key("w", "signal")
    proxied_single.stall(1.5, "down")  # the new connection's handshake waits 1.5 s
    assert wait_on(backend, [key], 1.0) is None
    assert blpop_timeouts(proxied_single) == [pytest.approx(MIN_WAIT + SLACK)]


# -- the worker's idle wait ----------------------------------------------------------------


def test_the_workers_idle_wait_keeps_its_deadline_on_a_silent_server(
    proxied_single: ProxiedTarget,
) -> None:
    """The wait ends on time even when no reply comes, and its reply is never read later.

    The BLPOP reaches Redis, then the proxy holds every reply; a task enqueued meanwhile
    pops the signal on the server, and that reply is due on the wait's connection. Redis's
    own timeout cannot end this wait (its reply is held too), and a socket timeout would
    end it late and as an error.
    """
    backend = proxied_single.queue_backend()
    queue = backend.queue("idle")
    worker = Worker([queue], timeout=30)
    stall = proxied_single.proxy.stall_on(5.0, "BLPOP")
    pusher = push_later(proxied_single.raw(), queue.signal_key, "1", 0.1)
    start = time.monotonic()
    worker._idle(0.3)
    took = time.monotonic() - start
    pusher.join()
    assert stall.fired.is_set()
    assert 0.3 <= took < 0.3 + LATE, took
    proxied_single.clear()
    assert proxied_single.raw().llen(queue.signal_key) == 0  # popped by the held BLPOP
    assert backend.client.set(backend.key("w", "own"), "mine") is True  # its own reply
    assert backend.client.get(backend.key("w", "own")) == b"mine"


def test_the_workers_idle_wait_ends_on_an_enqueue(single_target: RedisTarget) -> None:
    queue = single_target.queue_backend().queue("idle")
    worker = Worker([queue], timeout=30)
    pusher = push_later(single_target.raw, queue.signal_key, "1", 0.1)
    start = time.monotonic()
    worker._idle(30.0)
    pusher.join()
    assert time.monotonic() - start < 15.0  # at the push, not at the deadline
    assert single_target.raw.llen(queue.signal_key) == 0  # the wait popped it


# -- faults --------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["single", "cluster"])
def test_a_cut_connection_ends_a_wait_with_connection_failed(
    kind: str, request: pytest.FixtureRequest
) -> None:
    proxied: ProxiedTarget = request.getfixturevalue(f"proxied_{kind}")
    backend = proxied.lock_backend()
    key = backend.key("w", "signal")
    errors: list[BaseException] = []
    took: list[float] = []

    def wait() -> None:
        start = time.monotonic()
        try:
            wait_on(backend, [key], 60.0)
        except BaseException as exc:
            errors.append(exc)
        took.append(time.monotonic() - start)

    thread = threading.Thread(target=wait, daemon=True)
    thread.start()
    assert proxied.cut_once_sent("BLPOP") >= 1
    thread.join(30)
    assert len(errors) == 1 and isinstance(errors[0], ConnectionFailed), errors
    assert took[0] < 20.0  # at the cut, not at the 60 s deadline
    # the pool hands out a fresh connection afterwards
    assert backend.client.set(backend.key("w", "own"), "mine") is True
    assert backend.client.get(backend.key("w", "own")) == b"mine"


def test_a_cut_connection_ends_an_asyncio_wait_with_connection_failed(
    proxied_single: ProxiedTarget,
) -> None:
    backend = proxied_single.lock_backend()
    key = backend.key("w", "signal")

    async def main() -> tuple[type[BaseException] | None, float, Any]:
        client = backend.async_client()
        waiting = asyncio.ensure_future(wait_on_async(backend, [key], 60.0))
        while proxied_single.count("BLPOP") == 0:
            await asyncio.sleep(0.005)
        await asyncio.sleep(0.05)
        start = time.monotonic()
        proxied_single.cut_all()
        failed: type[BaseException] | None = None
        try:
            await asyncio.wait_for(waiting, 30)
        except ConnectionFailed as exc:
            failed = type(exc)
        took = time.monotonic() - start
        read = await client.set(backend.key("w", "own"), "mine")
        await client.aclose()
        return failed, took, read

    failed, took, read = asyncio.run(main())
    assert failed is ConnectionFailed
    assert took < 20.0  # at the cut, not at the 60 s deadline
    assert read is True
