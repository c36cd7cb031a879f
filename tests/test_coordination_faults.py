"""The fair lock and the latch through the fault proxy: a reply dropped on its way back
(the script ran, the client never heard), with the library's own resend or the client's.

Each case arms one fault on the first script call that names the primitive, checks the
fault fired, and checks Redis directly: a resent count-down is counted once, a resent
acquire is one grant with one fence, a resent release wakes the next waiter and ends the
hold once.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from .faults import command_name, contains
from .proxied import ProxiedTarget, cuts_only, no_resend_options, resend_options

pytestmark = pytest.mark.slow

SCRIPTS = (b"EVALSHA", b"EVAL")


@pytest.fixture(params=["single", "cluster"])
def proxied(request: pytest.FixtureRequest) -> ProxiedTarget:
    target: ProxiedTarget = request.getfixturevalue(f"proxied_{request.param}")
    return target


def script_naming(*needles: str) -> Any:
    inner = contains(*needles)
    return lambda args: command_name(args) in SCRIPTS and inner(args)


#: who resends: the library (a client without retries) or redis-py's retry policy
RESENDERS = {"library": no_resend_options, "client": resend_options}


@pytest.mark.parametrize("resender", sorted(RESENDERS))
def test_a_count_down_whose_reply_was_lost_is_counted_once(
    proxied: ProxiedTarget, resender: str
) -> None:
    options = {**RESENDERS[resender](proxied.kind), **cuts_only(proxied.kind)}
    latch = proxied.lock_backend(**options).latch("batch", count=3)
    assert latch.count() == 3
    faults = proxied.drop_reply(script_naming(":ln:batch"), then="cut")
    assert latch.count_down() == 2
    assert any(fault.fired.is_set() for fault in faults)
    assert latch.count() == 2  # once, though the script ran twice


@pytest.mark.parametrize("resender", sorted(RESENDERS))
def test_a_fair_acquire_and_release_whose_replies_were_lost_act_once(
    proxied: ProxiedTarget, resender: str
) -> None:
    options = {**RESENDERS[resender](proxied.kind), **cuts_only(proxied.kind)}
    backend = proxied.lock_backend(**options)
    lock = backend.fair_lock("fair", ttl=60)
    faults = proxied.drop_reply(script_naming("fl:fair"), then="cut")
    assert lock.acquire(timeout=10)
    assert any(fault.fired.is_set() for fault in faults)
    fence = lock.fence
    raw = proxied.raw()
    assert int(raw.hget(lock._key, "f")) == fence
    got: list[int] = []

    def waiter() -> None:
        other = backend.fair_lock("fair", ttl=60, wait_lease=30)
        if other.acquire(timeout=30):
            got.append(other.fence)
            other.release()

    thread = threading.Thread(target=waiter)
    thread.start()
    for _ in range(3000):  # bounded: until the waiter is queued
        if lock.waiting() == 1:
            break
        threading.Event().wait(0.01)
    assert lock._hold is not None
    token = lock._hold.owner.encode()
    # the holder's release: its token without holder metadata (a try carries "kind")
    release = script_naming("fq:fair")
    faults = proxied.drop_reply(
        lambda args: release(args) and token in args and not any(b'"kind"' in a for a in args),
        then="cut",
    )
    lock.release()  # the reply is lost, the release resent: answered "already released"
    assert any(fault.fired.is_set() for fault in faults)
    thread.join(timeout=60)
    assert got and got[0] > fence  # the waiter was granted after the one release
    assert not lock.locked() and lock.waiting() == 0
