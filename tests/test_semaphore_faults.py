"""Semaphore calls whose reply is lost on the wire, through the fault proxy (single, cluster).

The reply of the call's own script request is dropped and the connection cut; the client
sends the same request again (redis-py's ``Retry``, or the cluster client's own retries,
and then the lock layer's own resend). Whatever the call answered, afterwards: the permit
the caller believes it holds is the one Redis holds, a resent acquire took one permit and a
resent release freed one, and the other permits are exactly as many as the limit leaves.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from django_redislock.calls.script import sha_of
from django_redislock.locking.semaphore import Semaphore

from .faults import Args, command_name
from .proxied import ProxiedTarget, cuts_only, no_resend_options, resend_options

pytestmark = pytest.mark.timeout(60)

KINDS = ("single", "cluster")


def script_call(name: str) -> Callable[[Args], bool]:
    """Matches the ``EVALSHA`` requests of script ``name``."""
    sha = sha_of(name).encode()

    def match(args: Args) -> bool:
        return command_name(args) == b"EVALSHA" and len(args) > 1 and args[1] == sha

    return match


def semaphore(target: ProxiedTarget, options: dict[str, Any]) -> Semaphore:
    backend = target.lock_backend(**options, **cuts_only(target.kind))
    sem = backend.semaphore(f"exports-{target.prefix}", 2, ttl=30, timeout=5)
    warm = sem.acquire()  # loads the scripts: no NOSCRIPT round in the counts
    assert warm is not None
    warm.release()
    return sem


def held_in_redis(target: ProxiedTarget, sem: Semaphore) -> list[bytes]:
    return sorted(target.raw().zrange(sem.keys[0], 0, -1))


@pytest.mark.parametrize("resend", ["client", "library"])
@pytest.mark.parametrize("kind", KINDS)
def test_a_resent_acquire_after_a_lost_reply_takes_one_permit(
    kind: str, resend: str, request: pytest.FixtureRequest
) -> None:
    target: ProxiedTarget = request.getfixturevalue(f"proxied_{kind}")
    options = resend_options(kind) if resend == "client" else no_resend_options(kind)
    sem = semaphore(target, options)
    match = script_call("semaphore_acquire")
    seen = target.count(match)
    faults = target.drop_reply(match, then="cut")
    permit = sem.acquire()
    target.clear()
    assert sum(len(f.hits) for f in faults) == 1, "the fault never met the call"
    assert target.count(match) - seen == 2  # sent, then resent once
    assert permit is not None
    assert held_in_redis(target, sem) == [permit.id.encode()]
    other = sem.acquire()
    assert other is not None and sem.try_acquire() is None  # one taken by the resend, not two
    permit.release()
    other.release()
    assert held_in_redis(target, sem) == []


@pytest.mark.parametrize("kind", KINDS)
def test_a_resent_release_after_a_lost_reply_frees_one_permit(
    kind: str, request: pytest.FixtureRequest
) -> None:
    target: ProxiedTarget = request.getfixturevalue(f"proxied_{kind}")
    sem = semaphore(target, resend_options(kind))
    first, second = sem.acquire(), sem.acquire()
    assert first is not None and second is not None
    match = script_call("semaphore_release")
    seen = target.count(match)
    faults = target.drop_reply(match, then="cut")
    first.release()  # the resend finds it released: a success, not LockLost
    target.clear()
    assert sum(len(f.hits) for f in faults) == 1
    assert target.count(match) - seen == 2
    assert held_in_redis(target, sem) == [second.id.encode()]
    second.ensure_held()
    second.release()
    assert held_in_redis(target, sem) == []
