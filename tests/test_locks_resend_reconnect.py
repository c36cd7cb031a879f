"""A resend whose reconnect fails: the release is sent again on a new connection, within its bound.

A release whose reply is lost is resent up to ``RESOLVE_RESENDS`` times (docs/locks.md, "When
calls fail"). The connection that lost the reply is dropped, so each resend first opens a new
connection. When Redis does not answer that connection's set-up (redis-py's ``HELLO``) within
``SOCKET_TIMEOUT``, the resend never went out, and it counts as one of the resends all the same:
the next one opens another connection and goes out on it. When no reconnect is answered,
``release()`` raises ``ConnectionFailed`` after exactly those resends.

On a loaded machine a busy server makes that happen by timing (a reconnect meets the end of a
stall); here the fault proxy makes it happen on purpose, so no test depends on how fast anything
runs: the release reaches Redis and its reply is cut, then the next handshakes fail: swallowed
(``slow``: the client waits its socket timeout on a silent connection, as it did on the loaded
machine) or cut (``refused``: the client learns at once).
"""

from __future__ import annotations

import uuid
from typing import Any, Literal

import pytest

from django_redislock.exceptions import ConnectionFailed
from django_redislock.locking.calls import RESOLVE_RESENDS

from .faults import command_name, contains
from .proxied import RESOLVE_SOCKET_TIMEOUT, ProxiedTarget, no_resend_options

pytestmark = pytest.mark.timeout(60)

Reconnect = Literal["slow", "refused"]


def seen(target: ProxiedTarget, name: str) -> list[str]:
    """The handshakes and the script calls on ``name`` that reached the proxy, in order."""
    match = contains(name)  # during a release: its script calls
    out = []
    for args in target.proxy.requests:
        if command_name(args) == b"HELLO":
            out.append("hello")
        elif match(args):
            out.append("script")
    return out


def reentrant_hold(target: ProxiedTarget) -> tuple[Any, Any, str]:
    """A backend, a reentrant lock held twice by it, and the lock's name; scripts loaded."""
    backend = target.lock_backend(
        SOCKET_TIMEOUT=RESOLVE_SOCKET_TIMEOUT, **no_resend_options("single")
    )
    name = f"flt-reconnect-{uuid.uuid4().hex[:8]}"
    lock = backend.lock(name, ttl=30, reentrant=True)
    with lock:
        pass  # the scripts are loaded and a connection is open
    assert lock.acquire() and lock.acquire()
    return backend, lock, name


def release_with_lost_reply(
    target: ProxiedTarget, lock: Any, name: str, handshakes: int, reconnect: Reconnect
) -> None:
    """``lock.release()``: Redis applies it, its reply is cut, then ``handshakes`` fail.

    ``seen()`` afterwards shows which requests went out, in order.
    """
    proxy = target.proxy
    proxy.reset_counts()
    proxy.drop_reply(contains(name), then="cut")
    if reconnect == "slow":
        proxy.drop_request("HELLO", times=handshakes)
    else:
        proxy.drop_reply("HELLO", times=handshakes, then="cut")
    try:
        lock.release()
    finally:
        target.clear()


@pytest.mark.parametrize("reconnect", ["slow", "refused"])
def test_a_release_whose_resend_cannot_reconnect_is_sent_again(
    proxied_single: ProxiedTarget, reconnect: Reconnect
) -> None:
    backend, lock, name = reentrant_hold(proxied_single)
    release_with_lost_reply(proxied_single, lock, name, 1, reconnect)  # a partial step
    # applied once: by the first send (its reply cut); the resend answered as the first time
    assert seen(proxied_single, name) == ["script", "hello", "hello", "script"]
    assert lock.count == 1 and backend.held_locks()[0].count == 1
    release_with_lost_reply(proxied_single, lock, name, 1, reconnect)  # the last step
    assert seen(proxied_single, name) == ["script", "hello", "hello", "script"]
    assert not lock.held_by_me() and not lock.locked()


@pytest.mark.parametrize("reconnect", ["slow", "refused"])
def test_a_release_whose_resends_never_reconnect_raises_connection_failed(
    proxied_single: ProxiedTarget, reconnect: Reconnect
) -> None:
    backend, lock, name = reentrant_hold(proxied_single)
    with pytest.raises(ConnectionFailed):
        release_with_lost_reply(proxied_single, lock, name, RESOLVE_RESENDS, reconnect)
    # every resend tried a connection of its own; none went out
    assert seen(proxied_single, name) == ["script"] + ["hello"] * RESOLVE_RESENDS
    # the step counts as done (docs/locks.md): the first send applied it on the server
    assert lock.count == 1 and backend.held_locks()[0].count == 1
    lock.release()
    assert not lock.locked()
