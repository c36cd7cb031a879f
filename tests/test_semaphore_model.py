"""A hypothesis stateful test of the semaphore against a reference model, on a real server.

The model is a set of live permits, a queue of waiting callers and a limit. The steps are
what callers and failures do: non-blocking tries, releases (and their resends), acquires
resent after a lost reply, a permit's holder dying (its permit expires: its deadline is set
in the past, as its TTL passing would), waiting callers queued for a long time and then
dying (their lease lapses) or taking themselves back, and the limit changing at run time.
After every step the permits Redis counts are the model's; a grant never makes the holders
more than the limit; a try never overtakes a live queued caller; fences only increase.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    invariant,
    multiple,
    rule,
    run_state_machine_as_test,
)

from django_redislock.exceptions import LockLost
from django_redislock.locking.owners import current_user
from django_redislock.locking.semaphore import Permit, Semaphore

from .conftest import RedisTarget

pytestmark = pytest.mark.timeout(300)

#: A queued caller's lease in these steps: far longer than any run, so only a step lapses it.
LONG_LEASE_MS = 600_000
_names = itertools.count()
#: owners are unique across examples too: the bucket's request memory outlives an example
_owners = itertools.count()


def run(sem: Semaphore, call: tuple[str, list[str], list[Any]]) -> Any:
    script, keys, args = call
    return sem.backend.script(script)(keys=keys, args=args)


class SemaphoreModel(RuleBasedStateMachine):
    target: RedisTarget

    permits = Bundle("permits")
    waiters = Bundle("waiters")

    def __init__(self) -> None:
        super().__init__()
        backend = self.target.lock_backend()
        self.sem = backend.semaphore(f"model-{next(_names)}", 2, ttl=600, timeout=0)
        self.live: set[str] = set()  # permit ids the model holds live
        self.queued: list[str] = []  # waiting callers, in arrival order
        self.limit = 2
        self.last_fence = 0

    def granted(self, fence: int) -> None:
        assert fence > self.last_fence
        self.last_fence = fence
        assert len(self.live) <= self.limit  # never more holders than the limit

    @rule(target=permits)
    def try_acquire(self) -> Any:
        expect = len(self.live) + len(self.queued) < self.limit
        permit = self.sem.try_acquire()
        assert (permit is not None) == expect
        if permit is None:
            return multiple()  # nothing new
        self.live.add(permit.id)
        self.granted(permit.fence)
        return permit

    @rule(target=permits)
    def acquire_resent(self) -> Any:
        expect = len(self.live) + len(self.queued) < self.limit
        permit = self.sem.permit()
        owner = f"resent-{next(_owners)}"
        call = permit._attempt(owner, "", False, 0.0)
        first, again = run(self.sem, call), run(self.sem, call)
        assert int(first[0]) == int(again[0]) == int(expect)
        if expect:  # the resend answers the same grant (a refusal changed nothing anyway)
            assert int(first[1]) == int(again[1])
        if not expect:
            return multiple()
        assert permit._granted(owner, current_user()[0], first)
        self.live.add(permit.id)
        self.granted(permit.fence)
        return permit

    @rule(permit=consumes(permits), resend=st.booleans())
    def release(self, permit: Any, resend: bool) -> None:
        if not isinstance(permit, Permit):
            return
        hold = permit._hold or permit._lost_hold
        if permit.id not in self.live:
            with pytest.raises(LockLost):
                permit.release()
            return
        call = permit._release_call(hold) if hold is not None else None
        permit.release()
        self.live.discard(permit.id)
        if resend and call is not None:
            assert [int(v) for v in run(self.sem, call)] == [2, 0]  # a resend: a no-op

    @rule(permit=permits)
    def holder_dies(self, permit: Any) -> None:
        if not isinstance(permit, Permit) or permit.id not in self.live:
            return
        self.target.raw.zadd(self.sem.keys[0], {permit.id: 1})  # its TTL passed
        self.live.discard(permit.id)

    @rule(target=waiters)
    def caller_waits(self) -> Any:
        owner = f"waiter-{next(_owners)}"
        script, keys, args = self.sem.permit()._attempt(owner, "", True, 1.0)
        args = [*args]
        args[3] = LONG_LEASE_MS
        reply = run(self.sem, (script, keys, args))
        if len(self.live) + len(self.queued) < self.limit:
            assert int(reply[0]) == 1  # a free permit nobody queued for: granted at once
            self.live.add(f"{owner}@{int(reply[1])}")
            self.granted(int(reply[1]))
            return multiple()
        assert int(reply[0]) == 0 and int(reply[2]) == len(self.queued)
        self.queued.append(owner)
        return owner

    @rule(owner=consumes(waiters), how=st.sampled_from(["lapses", "takes back"]))
    def waiter_goes(self, owner: Any, how: str) -> None:
        if not isinstance(owner, str) or owner not in self.queued:
            return
        if how == "lapses":
            self.target.raw.zadd(self.sem.keys[2], {owner: 1})  # died: its lease ran out
        else:
            run(self.sem, self.sem.permit()._abandon_call(owner))
        self.queued.remove(owner)

    @rule(limit=st.integers(min_value=0, max_value=4))
    def change_limit(self, limit: int) -> None:
        self.sem.permits = limit
        self.limit = limit

    @invariant()
    def redis_counts_the_models_permits(self) -> None:
        assert self.sem.held() == len(self.live)


@pytest.mark.parametrize("kind", ["single", "cluster"])
def test_the_semaphore_follows_its_model(kind: str, request: pytest.FixtureRequest) -> None:
    target: RedisTarget = request.getfixturevalue(f"{kind}_target")
    SemaphoreModel.target = target
    run_state_machine_as_test(
        SemaphoreModel,
        settings=settings(
            max_examples=25,
            stateful_step_count=30,
            deadline=None,
            suppress_health_check=list(HealthCheck),
        ),
    )
