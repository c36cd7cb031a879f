"""Model-based tests (hypothesis stateful) of the fair lock and the count-down latch.

Each machine drives the primitive's scripts on a real server (single and cluster) through
the same calls the lock and latch objects send, and checks Redis against a small model
after every step.

Fair lock: waiters arrive (a waiting try with a fresh owner token), try again, are
cancelled (the take-back a cancelled acquire sends), crash (their wait-lease is made to
lapse, as time would), and the holder releases; tries and releases are also resent.
Checked: a try is granted exactly when the lock is free and its token is the first live
waiter (grant order = arrival order among live waiters), fences strictly increase, the
queue in Redis (less lapsed leases) is the model's queue, a resent grant or release is
answered as the first time, and a cancelled or released token is never granted later.

Latch: count-downs with fresh request ids, resends of earlier ones, reads. Checked: the
count is the initial count less the distinct count-downs applied before it reached zero.

Examples are derandomized and shrinking is off; no step sleeps.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from django_redislock.backends.redis import RedisLockBackend
from django_redislock.locking.fair import FairLock

from .conftest import RedisTarget

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

SETTINGS = settings(
    max_examples=12,
    stateful_step_count=30,
    derandomize=True,
    deadline=None,
    phases=(Phase.generate,),
    suppress_health_check=list(HealthCheck),
)


@pytest.fixture(params=["single", "cluster"])
def real_target(request: pytest.FixtureRequest) -> RedisTarget:
    target: RedisTarget = request.getfixturevalue(f"{request.param}_target")
    return target


def ints(reply: Any) -> list[Any]:
    return [x.decode() if isinstance(x, bytes) else int(x) for x in reply]


def fair_machine(target: RedisTarget) -> type[RuleBasedStateMachine]:
    names = itertools.count()

    class FairModel(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            backend = RedisLockBackend("model", target.params())
            self.lock: FairLock = backend.fair_lock(f"fair-{next(names)}", ttl=600, wait_lease=600)
            self.tokens = itertools.count()
            self.holder: tuple[str, int] | None = None
            self.queue: list[str] = []
            self.gone: list[str] = []  # released or cancelled: never granted again
            self.fence = 0

        def _try(self, token: str) -> list[Any]:
            return ints(self.lock._call(self.lock._attempt(token, "{}", True, 5.0)))

        def _expect_try(self, token: str, reply: list[Any]) -> None:
            if self.holder is not None and self.holder[0] == token:
                assert reply == [1, self.holder[1]], "a resent grant answers the same fence"
                return
            if token in self.gone:
                assert reply == [0, 0, 0], "a cancelled or released token is never granted"
                return
            first = self.queue[0] if self.queue else token
            if self.holder is None and first == token:
                assert reply[0] == 1 and reply[1] > self.fence, (reply, self.fence)
                self.fence = reply[1]
                self.holder = (token, reply[1])
                if token in self.queue:
                    self.queue.remove(token)
                return
            assert reply[0] == 0, f"granted out of turn: {token} behind {self.queue}"
            if token not in self.queue:
                self.queue.append(token)
            assert reply[2] == self.queue.index(token) + 1

        @rule()
        def arrive(self) -> None:
            # owner tokens are unique (the bucket's request memory outlives one example)
            token = f"{self.lock.name}-t{next(self.tokens)}"
            self._expect_try(token, self._try(token))

        @precondition(lambda self: bool(self.queue))
        @rule(data=st.data())
        def try_again(self, data: st.DataObject) -> None:
            token = data.draw(st.sampled_from(self.queue))
            self._expect_try(token, self._try(token))

        @precondition(lambda self: self.holder is not None)
        @rule()
        def resend_grant(self) -> None:
            assert self.holder is not None
            self._expect_try(self.holder[0], self._try(self.holder[0]))

        @precondition(lambda self: self.holder is not None)
        @rule(resend=st.booleans())
        def release(self, resend: bool) -> None:
            assert self.holder is not None
            token, fence = self.holder
            call = ("fair_release", self.lock._release_keys, [token, fence])
            reply = ints(self.lock._call(call))
            self.holder = None
            self.gone.append(token)
            assert reply == [1, self.queue[0] if self.queue else ""], "wakes the first live"
            if resend:
                assert ints(self.lock._call(call))[0] == 2, "a resent release is a no-op"

        @precondition(lambda self: bool(self.queue))
        @rule(data=st.data())
        def cancel(self, data: st.DataObject) -> None:
            token = data.draw(st.sampled_from(self.queue))
            reply = ints(self.lock._call(self.lock._abandon_call(token)))
            self.queue.remove(token)
            self.gone.append(token)
            assert reply[0] == 1
            if self.holder is None:  # the lock is free: the new first waiter is named
                assert reply[1] == (self.queue[0] if self.queue else "")

        @precondition(lambda self: bool(self.queue))
        @rule(data=st.data())
        def crash(self, data: st.DataObject) -> None:
            token = data.draw(st.sampled_from(self.queue))
            target.raw.zadd(self.lock._lease_key, {token: 1})  # its lease lapsed long ago
            self.queue.remove(token)

        @precondition(lambda self: bool(self.gone))
        @rule(data=st.data())
        def late_try(self, data: st.DataObject) -> None:
            token = data.draw(st.sampled_from(self.gone))
            self._expect_try(token, self._try(token))

        @invariant()
        def redis_agrees(self) -> None:
            raw = target.raw
            owner, fence = raw.hmget(self.lock._key, "o", "f")
            if self.holder is None:
                assert owner is None
            else:
                assert (owner.decode(), int(fence)) == self.holder
            leases = dict(raw.zrange(self.lock._lease_key, 0, -1, withscores=True))
            queued = [m.decode() for m in raw.zrange(self.lock._queue_key, 0, -1)]
            live = [m for m in queued if leases.get(m.encode(), 0) > 1]
            assert live == self.queue

    return FairModel


def latch_machine(target: RedisTarget) -> type[RuleBasedStateMachine]:
    names = itertools.count()

    class LatchModel(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            backend = RedisLockBackend("model", target.params())
            self.initial = 4
            self.latch = backend.latch(f"latch-{next(names)}", count=self.initial)
            self.ids = itertools.count()
            self.applied: list[str] = []
            self.left = self.initial

        @rule()
        def count_down(self) -> None:
            rid = f"{self.latch.name}-r{next(self.ids)}"
            reply = ints(self.latch._run(self.latch._count_down_call(rid)))
            if self.left == 0:
                assert reply == [0, 0]
                return
            self.left -= 1
            self.applied.append(rid)
            assert reply == [1, self.left]

        @precondition(lambda self: bool(self.applied))
        @rule(data=st.data())
        def resend(self, data: st.DataObject) -> None:
            rid = data.draw(st.sampled_from(self.applied))
            reply = ints(self.latch._run(self.latch._count_down_call(rid)))
            assert reply == [2, self.left], "a resent count-down is counted once"

        @rule()
        def wait_now(self) -> None:
            assert self.latch.wait(0) is (self.left == 0)

        @invariant()
        def redis_agrees(self) -> None:
            assert self.latch.count() == self.left == max(0, self.initial - len(self.applied))

    return LatchModel


def test_fair_lock_against_its_model(real_target: RedisTarget) -> None:
    run_state_machine_as_test(fair_machine(real_target), settings=SETTINGS)


def test_latch_against_its_model(real_target: RedisTarget) -> None:
    run_state_machine_as_test(latch_machine(real_target), settings=SETTINGS)
