"""Each level of a reentrant hold keeps its own deadline; the hold lives as long as the latest.

issue 23 (Build 2): a re-entry with a longer ttl than the outer level's used to lengthen the
shared hold for good, so an outer hold of 2 s lived 20 s because an inner level once asked for
20 s, also after that inner level was released. Now each level records its own deadline in
the hold's hash (``@<request id>``), a release of a level sets the hold's expiry back to the
latest deadline of the levels left, and an ``extend`` or watchdog renewal moves only the
deadlines of its own object's levels (never earlier). The assertions compare the hold's PTTL
with the levels' ttls in each state, never with elapsed time.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from django_redislock.calls.requests import request_id
from django_redislock.exceptions import LockLost
from django_redislock.locking.owners import current_user

from .conftest import RedisTarget


def _pttl(target: RedisTarget, lock: Any) -> int:
    return int(target.raw.pttl(lock._key))


def _run(backend: Any, call: tuple[str, list[str], list[Any]]) -> Any:
    script, keys, args = call
    return backend.script(script)(keys=keys, args=args)


def test_an_inner_levels_longer_ttl_ends_with_its_release(redis_target: RedisTarget) -> None:
    backend = redis_target.lock_backend()
    outer = backend.lock("lv", ttl=2, reentrant=True)
    inner = backend.lock("lv", ttl=20, reentrant=True)
    assert outer.acquire()
    assert _pttl(redis_target, outer) <= 2_000
    assert inner.acquire()
    assert _pttl(redis_target, outer) > 2_000  # the inner level needs more: the hold grows
    inner.release()
    assert 0 < _pttl(redis_target, outer) <= 2_000  # back to the outer level's own deadline
    assert outer.owned()
    assert backend.lock("lv", ttl=5).acquire(blocking=False) is False
    outer.release()
    assert backend.lock("lv", ttl=5).acquire(blocking=False) is True


def test_an_inner_levels_shorter_ttl_never_shortens_the_hold(redis_target: RedisTarget) -> None:
    backend = redis_target.lock_backend()
    outer = backend.lock("lv-s", ttl=20, reentrant=True)
    inner = backend.lock("lv-s", ttl=2, reentrant=True)
    outer.acquire()
    inner.acquire()
    assert _pttl(redis_target, outer) > 2_000
    inner.extend(1)
    assert _pttl(redis_target, outer) > 2_000
    inner.release()
    assert _pttl(redis_target, outer) > 2_000
    outer.release()


def test_a_resent_inner_release_drops_one_level(redis_target: RedisTarget) -> None:
    backend = redis_target.lock_backend()
    outer = backend.lock("lv-r", ttl=2, reentrant=True)
    middle = backend.lock("lv-r", ttl=20, reentrant=True)
    inner = backend.lock("lv-r", ttl=40, reentrant=True)
    outer.acquire()
    middle.acquire()
    inner.acquire()
    assert _pttl(redis_target, outer) > 20_000
    hold = inner._hold
    assert hold is not None
    call = inner._release_call(hold)
    assert int(_run(backend, call)[0]) == 1
    assert int(_run(backend, call)[0]) == 2  # the resend: already done, nothing more dropped
    assert 2_000 < _pttl(redis_target, outer) <= 20_000  # the middle level's deadline is left
    assert int(redis_target.raw.hget(outer._key, "n")) == 2
    middle.release()
    assert 0 < _pttl(redis_target, outer) <= 2_000
    outer.release()
    assert not redis_target.raw.exists(outer._key)


def test_an_extend_moves_only_its_own_levels(redis_target: RedisTarget) -> None:
    backend = redis_target.lock_backend()
    outer = backend.lock("lv-x", ttl=2, reentrant=True)
    inner = backend.lock("lv-x", ttl=2, reentrant=True)
    outer.acquire()
    inner.acquire()
    inner.extend(20)
    assert _pttl(redis_target, outer) > 2_000
    inner.release()
    assert 0 < _pttl(redis_target, outer) <= 2_000
    # an object re-entered twice: its extend moves both of its levels
    outer.acquire()
    outer.extend(20)
    outer.release()
    assert _pttl(redis_target, outer) > 2_000
    outer.release()


def test_an_inner_watchdog_renewal_lasts_only_as_long_as_its_level(
    redis_target: RedisTarget,
) -> None:
    backend = redis_target.lock_backend()
    outer = backend.lock("lv-w", ttl=2, reentrant=True)
    inner = backend.lock("lv-w", ttl=20, reentrant=True, watchdog=True)
    outer.acquire()
    inner.acquire()
    hold = inner._hold
    assert hold is not None
    assert int(_run(backend, inner.renew_call(hold))) > 2_000  # what its watchdog sends
    inner.release()
    assert 0 < _pttl(redis_target, outer) <= 2_000
    outer.release()


def test_a_hold_whose_remaining_levels_all_passed_ends_with_the_inner_release(
    redis_target: RedisTarget,
) -> None:
    backend = redis_target.lock_backend()
    outer = backend.lock("lv-p", ttl=0.1, reentrant=True)
    inner = backend.lock("lv-p", ttl=20, reentrant=True)
    outer.acquire()
    inner.acquire()
    time.sleep(0.3)  # the outer level's own deadline passes; the inner level keeps the hold
    assert outer.owned()
    inner.release()
    assert not redis_target.raw.exists(outer._key)
    assert backend.lock("lv-p", ttl=5).acquire(blocking=False) is True
    with pytest.raises(LockLost):
        outer.release()


def test_a_taken_back_reentry_drops_its_level(redis_target: RedisTarget) -> None:
    backend = redis_target.lock_backend()
    outer = backend.lock("lv-t", ttl=2, reentrant=True)
    inner = backend.lock("lv-t", ttl=20, reentrant=True)
    outer.acquire()
    owner = current_user()[0]
    inner._rid = request_id()
    assert int(_run(backend, inner._attempt(owner, "{}", False, 0.0))[0]) == 1
    assert _pttl(redis_target, outer) > 2_000
    assert int(_run(backend, inner._abandon_call(owner))[0]) == 1  # its caller took it back
    assert 0 < _pttl(redis_target, outer) <= 2_000
    assert int(redis_target.raw.hget(outer._key, "n")) == 1
    outer.release()
    assert not redis_target.raw.exists(outer._key)


def test_a_renewal_that_arrives_after_its_levels_release_moves_nothing(
    redis_target: RedisTarget,
) -> None:
    """The watchdog's renewal and the release race; a late renewal must not bring the level back."""
    backend = redis_target.lock_backend()
    outer = backend.lock("lv-late", ttl=2, reentrant=True)
    inner = backend.lock("lv-late", ttl=20, reentrant=True, watchdog=True)
    outer.acquire()
    inner.acquire()
    hold = inner._hold
    assert hold is not None
    late = inner.renew_call(hold)  # on its way while the release overtakes it
    inner.release()
    assert 0 < int(_run(backend, late)) <= 2_000  # still held (by the outer level), not lengthened
    assert 0 < _pttl(redis_target, outer) <= 2_000
    outer.release()


def test_async_levels_keep_their_own_deadlines(redis_target: RedisTarget) -> None:
    backend = redis_target.lock_backend()

    async def main() -> None:
        outer = backend.lock("lv-a", ttl=2, reentrant=True)
        inner = backend.lock("lv-a", ttl=2, reentrant=True)
        async with outer:
            async with inner:
                await inner.extend_async(20)
                assert _pttl(redis_target, outer) > 2_000
            assert 0 < _pttl(redis_target, outer) <= 2_000
        assert not redis_target.raw.exists(outer._key)

    asyncio.run(main())
