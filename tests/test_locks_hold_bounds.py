"""A hold is never cut short by one of its own parts, nor ended by a stale object of its owner.

issue 23: an inner reentrant level (its watchdog renewal, its ``extend``) used to set the shared
hold's TTL to its own, shorter one, so the hold ended while the outer level still held; and the
``release()`` of an explicit-owner object whose hold was already known lost ended that owner's
newer hold. Both on a real server.
"""

from __future__ import annotations

import pytest

from django_redislock.exceptions import LockLost, LockNotOwned

from .conftest import RedisTarget


def _pttl(target: RedisTarget, key: str) -> int:
    return int(target.raw.pttl(key))


def test_an_inner_watchdog_renewal_never_shortens_the_outer_hold(
    single_target: RedisTarget,
) -> None:
    backend = single_target.lock_backend()
    outer = backend.lock("nest", ttl=20, reentrant=True)
    inner = backend.lock("nest", ttl=2, reentrant=True)
    outer.acquire()
    inner.acquire()
    hold = inner._hold
    assert hold is not None
    script, keys, args = inner.renew_call(hold)  # what the inner object's watchdog sends
    backend.script(script)(keys=keys, args=args)
    inner.release()
    assert _pttl(single_target, outer._key) > 15_000
    assert backend.lock("nest", ttl=5).acquire(blocking=False) is False
    outer.release()


def test_an_inner_extend_never_shortens_the_outer_hold(single_target: RedisTarget) -> None:
    backend = single_target.lock_backend()
    outer = backend.lock("nest-x", ttl=20, reentrant=True)
    inner = backend.lock("nest-x", ttl=20, reentrant=True)
    outer.acquire()
    inner.acquire()
    inner.extend(0.5)
    inner.release()
    assert _pttl(single_target, outer._key) > 15_000
    assert backend.lock("nest-x", ttl=5).acquire(blocking=False) is False
    outer.extend(40)  # a longer deadline is still set
    assert _pttl(single_target, outer._key) > 35_000
    outer.release()


def test_a_lost_owner_hold_release_leaves_the_owners_newer_hold(
    single_target: RedisTarget,
) -> None:
    backend = single_target.lock_backend()
    stale = backend.lock("job", ttl=5, owner="task-9")
    stale.acquire()
    single_target.raw.delete(stale._key)  # the hold ends (expired, force-released)
    with pytest.raises(LockLost):
        stale.ensure_held()
    newer = backend.lock("job", ttl=5, owner="task-9")  # the task's redelivery, same owner
    assert newer.acquire(blocking=False)
    with pytest.raises((LockLost, LockNotOwned)):
        stale.release()
    assert newer.owned()
    assert backend.lock("job", ttl=5).acquire(blocking=False) is False
    newer.release()
