"""A cancelled acquire or release whose clean-up meets a slow server still cleans up.

A cancellation cuts an asyncio call while its reply is awaited; redis-py then closes
that connection, so the clean-up (the take-back of the acquire's possible grant, or
the release sent once more) goes out on a new one, after the connection's handshake
(``CLIENT SETINFO``). On a loaded machine that handshake alone took over a second, and
the clean-up used to be given up at ``ABANDON_SECONDS`` (1 s), before its request was
even written: the grant stayed, held by no object, for its whole TTL, though Redis
answered (seen under load in the cancellation sweep, tests/test_lock_cancellation.py).

Here the fault proxies hold the new connection's handshake reply past that second
(well below ``SOCKET_TIMEOUT``: Redis is slow, not unreachable). The test then waits
for the clean-up itself to finish (the library's own clean-up tasks, with a generous
deadline) and asserts that the lock is free in Redis, that the clean-up's request
reached the server, and that nothing renews the hold. The fair lock takes a try back
by its own script, in its own clean-up task, and is checked the same way.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from django_redislock.calls.script import sha_of
from django_redislock.locking.calls import ABANDON_SECONDS
from django_redislock.locking.watchdog import watchdog

from .conftest import cleanups_finished
from .faults import Args, Fault
from .proxied import CUT_SOCKET_TIMEOUT, ProxiedTarget

TTL = 30.0
#: How long the new connection's handshake reply is held: past the caller's wait for the
#: clean-up, far below the socket timeout.
HANDSHAKE_DELAY = ABANDON_SECONDS + 1.0
#: How long the acquire's own reply is held (the grant is applied; its caller never learns it).
ACQUIRE_REPLY_DELAY = 10.0
#: The mutex's acquire and release scripts (the release also takes an acquire back).
LOCK_SCRIPTS = ("lock_acquire", "lock_release")
#: Generous deadline for the events the test waits for (a loaded machine).
DEADLINE = 20.0


def script_call(name: str) -> Any:
    sha = sha_of(name).encode()
    return lambda args: args[:1] == (b"EVALSHA",) and sha in args


def lib_name_handshake(args: Args) -> bool:
    return args[:3] == (b"CLIENT", b"SETINFO", b"LIB-NAME")


async def fired(faults: list[Fault]) -> None:
    """Until one of ``faults`` fired (they wait on threads: polled, bounded)."""
    for _ in range(int(DEADLINE / 0.01)):
        if any(fault.fired.is_set() for fault in faults):
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the fault never fired")


@pytest.mark.parametrize("kind", ["single", "cluster"])
@pytest.mark.parametrize(
    ("lock_kind", "operation"), [("mutex", "acquire"), ("mutex", "release"), ("fair", "acquire")]
)
def test_a_clean_up_slowed_by_a_reconnect_still_lands(
    request: pytest.FixtureRequest, kind: str, lock_kind: str, operation: str
) -> None:
    target: ProxiedTarget = request.getfixturevalue(f"proxied_{kind}")
    backend = target.lock_backend(SOCKET_TIMEOUT=CUT_SOCKET_TIMEOUT)
    name = f"slow-reconnect:{uuid.uuid4().hex[:8]}"
    build = backend.fair_lock if lock_kind == "fair" else backend.lock
    lock = build(name, ttl=TTL, watchdog=True)
    acquire, release = ("fair_acquire", "fair_release") if lock_kind == "fair" else LOCK_SCRIPTS
    raw = target.raw()

    async def acquire_then_release() -> None:  # one task: a hold belongs to its task
        assert await lock.acquire_async()
        await lock.release_async()

    async def main() -> int:
        await lock.acquire_async()
        await lock.release_async()  # connected and the scripts loaded: no NOSCRIPT below
        if operation == "release":
            # the release never reaches Redis and its connection goes silent
            cut = [proxy.drop_request(script_call(release)) for proxy in target.proxies]
            call = asyncio.ensure_future(acquire_then_release())
        else:
            # the grant is applied; its reply is held, so the caller never learns it
            cut = [
                proxy.delay_reply(ACQUIRE_REPLY_DELAY, script_call(acquire))
                for proxy in target.proxies
            ]
            call = asyncio.ensure_future(lock.acquire_async(blocking=False))
        await fired(cut)
        assert raw.hget(lock._key, "o") is not None  # held in Redis: the case to clean up
        handshakes = [
            proxy.delay_reply(HANDSHAKE_DELAY, lib_name_handshake) for proxy in target.proxies
        ]
        sent_before = target.count(script_call(release))
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        assert await cleanups_finished(DEADLINE), "the clean-up did not finish"
        assert any(fault.fired.is_set() for fault in handshakes)  # it met the slow handshake
        return target.count(script_call(release)) - sent_before

    sent = asyncio.run(main())
    assert not lock.held_by_me()
    assert raw.hget(lock._key, "o") is None, "a grant that no lock object holds"
    assert sent == 1  # the clean-up's one request went out, through the slow handshake
    assert not watchdog.registered()
