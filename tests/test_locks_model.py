"""Model-based tests (hypothesis stateful) of the mutex, reentrant and read-write locks.

A small reference model tracks who holds what, with which fence and count.
Hypothesis drives a few actors against a real server (single and cluster,
through the fault proxy): acquires, releases, extends, re-entries, reads,
writes and downgrades; waits that let short holds expire; and, in the fault
runs, reply losses (the request ran, the reply was lost: the call fails) and
resends (the reply was lost, the client's retry policy sent the request again).

After every step, raw clients read Redis and check the model's invariants:

* at most one writer, or only readers (a mutex: at most one holder);
* fences strictly increase with every new grant (a re-entry or a downgrade
  keeps its fence);
* no hold without an owner: what Redis holds is what some actor believes it
  holds, and once the TTLs have passed nothing is held;
* counts agree: a reentrant owner's count in Redis is the object's count.

Holds get a long TTL (never reached within an example) or a short one
(``SHORT_TTL``): a short hold may end at any moment, so while it is young the
model accepts either outcome where it matters and learns from what it sees;
the ``expire`` step sleeps past ``SHORT_TTL`` and then every short hold must
be gone. Examples are derandomized (the same sequence every run), shrinking is
off, and every wait is bounded: the whole module takes a few tens of seconds.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from dataclasses import dataclass
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
from redis.backoff import NoBackoff
from redis.retry import Retry

from django_redislock.exceptions import ConnectionFailed, LockLost
from django_redislock.locking.keys import lock_key

from .faults import Args, command_name
from .proxied import ProxiedTarget

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

LONG_TTL = 20.0
SHORT_TTL = 0.25
#: How long ``expire`` sleeps: past every short hold, with slack for a loaded machine.
EXPIRE_SLEEP = SHORT_TTL + 0.15
MAX_EXPIRES = 2
SCRIPT_COMMANDS = (b"EVALSHA", b"EVAL")
#: What happens to an operation's reply in the fault runs (the clean runs ignore it).
FAULT = st.sampled_from(("none", "lost", "resend"))


def script_on(name: str) -> Any:
    needle = name.encode()

    def match(args: Args) -> bool:
        return command_name(args) in SCRIPT_COMMANDS and any(needle in arg for arg in args)

    return match


@dataclass
class Held:
    """What the model knows of one hold."""

    obj: Any
    fence: int
    short: bool
    granted_at: float
    count: int = 1
    #: When the call that granted (or last extended) it was sent: the server's TTL started
    #: after this and before ``granted_at`` (the reply), which a loaded machine can delay.
    sent_at: float = 0.0

    def certain(self) -> bool:
        """Surely still live: a long hold, or a short one well inside its TTL."""
        return not self.short or time.monotonic() - self.sent_at < SHORT_TTL / 3

    def surely_gone(self) -> bool:
        return self.short and time.monotonic() - self.granted_at > EXPIRE_SLEEP


class LockModel(RuleBasedStateMachine):
    """Shared machinery: the target, the lock name, faults, fences, expiry."""

    target: ProxiedTarget
    faults_on = False

    def __init__(self) -> None:
        super().__init__()
        kwargs = {"retry": Retry(NoBackoff(), 1 if self.faults_on else 0)}
        self.backend = self.target.lock_backend(CLIENT_KWARGS=kwargs)
        self.name = f"model-{uuid.uuid4().hex[:10]}"
        self.last_fence = 0
        self.expires = 0
        self.sent_at = 0.0
        #: Holds some failed call may have left in Redis (unknown outcome): tolerated until
        #: they are sure to have expired.
        self.phantoms: list[float] = []
        self.raw = self.target.raw()

    def teardown(self) -> None:
        self.target.clear()

    # -- faults ---------------------------------------------------------------------------

    def arm(self, fault: str) -> None:
        """Before a call: lose its reply once (``resend``: the retry gets through) or twice
        (``lost``: the retry's reply is lost too, and the call fails). No-op without faults."""
        self.target.clear()
        if self.faults_on and fault != "none":
            times = 1 if fault == "resend" else 2
            self.target.drop_reply(script_on(self.name), times=times, then="cut")

    def call(self, fn: Any, *args: Any) -> tuple[bool, Any]:
        """Run one lock call; (False, error) when it failed with a connection error."""
        self.sent_at = time.monotonic()
        try:
            return True, fn(*args)
        except ConnectionFailed as exc:
            return False, exc
        finally:
            self.target.clear()

    def new_fence(self, fence: int) -> None:
        assert fence > self.last_fence, f"fence {fence} after {self.last_fence}"
        self.last_fence = fence

    def phantom(self, short: bool) -> None:
        """A failed call may have left (or kept) a hold in Redis: tolerate it until it ends."""
        self.phantoms.append(time.monotonic() + (SHORT_TTL if short else LONG_TTL))

    def live_phantoms(self) -> bool:
        now = time.monotonic()
        self.phantoms = [t for t in self.phantoms if t + 0.15 > now]
        return bool(self.phantoms)

    def redis_now_ms(self) -> int:
        seconds, micros = self.raw.time()
        return int(seconds) * 1000 + int(micros) // 1000

    def wait_expiry(self) -> None:
        self.expires += 1
        time.sleep(EXPIRE_SLEEP)


class MutexModel(LockModel):
    """Mutex actors (``reentrant=False``) or reentrant owners (``reentrant=True``)."""

    reentrant = False
    actors = ("A", "B", "C")  # C's holds are short

    def __init__(self) -> None:
        super().__init__()
        self.locks = {
            actor: self.backend.lock(
                self.name,
                ttl=SHORT_TTL if actor == "C" else LONG_TTL,
                reentrant=self.reentrant,
                owner=f"owner-{actor}-{uuid.uuid4().hex[:6]}" if self.reentrant else None,
            )
            for actor in self.actors
        }
        self.held: dict[str, Held] = {}

    def drop_gone(self) -> None:
        """Forget holds that surely expired; their objects' release must report the loss."""
        self.target.clear()
        for actor, held in list(self.held.items()):
            if held.surely_gone():
                del self.held[actor]
                with pytest.raises(LockLost):
                    while held.obj.held_by_me():  # a reentrant object: once per count
                        held.obj.release()

    @rule(actor=st.sampled_from(actors), fault=FAULT)
    def acquire(self, actor: str, fault: str) -> None:
        self.drop_gone()
        lock = self.locks[actor]
        if actor in self.held and not self.reentrant:
            return
        others = [h for a, h in self.held.items() if a != actor]
        self.arm(fault)
        ok, result = self.call(lock.acquire, False)
        if not ok:
            assert not (lock.held_by_me() and actor not in self.held), "a failed acquire holds"
            if actor in self.held:  # a failed re-entry: the count must still match Redis
                self.held[actor].count = lock.count
            self.phantom(actor == "C")
            return
        if any(h.certain() for h in others):
            assert result is False, f"{actor} got in while another certainly holds"
        elif not others and not self.live_phantoms():
            assert result is True, f"{actor} refused a free lock"
        if not result:
            return
        for other in [a for a in self.held if a != actor]:  # they must have expired
            gone = self.held.pop(other)
            # its object may not know yet (a loaded machine let a short hold end between
            # two rules): its release reports the loss, and the object is free again
            with contextlib.suppress(LockLost):
                while gone.obj.held_by_me():
                    gone.obj.release()
        if actor in self.held:
            held = self.held[actor]
            assert lock.fence == held.fence, "a re-entry changed the fence"
            held.count += 1
            held.granted_at, held.sent_at = time.monotonic(), self.sent_at
        else:
            self.new_fence(lock.fence)
            self.held[actor] = Held(
                lock, lock.fence, actor == "C", time.monotonic(), sent_at=self.sent_at
            )
        assert lock.count == self.held[actor].count or not self.reentrant

    @rule(actor=st.sampled_from(actors), fault=FAULT)
    def release(self, actor: str, fault: str) -> None:
        self.drop_gone()
        if actor not in self.held:
            return
        held = self.held[actor]
        lock = self.locks[actor]
        self.arm(fault)
        ok, result = self.call(self._release, lock)
        if not ok:
            # unknown outcome: the object must have given the hold up (or kept a count
            # that Redis agrees with, which the invariant checks)
            if not lock.held_by_me():
                del self.held[actor]
                self.phantom(held.short)
            else:
                held.count = lock.count
            return
        if result == "lost":
            assert not held.certain(), f"{actor}'s certain hold was reported lost"
            del self.held[actor]
            return
        held.count -= 1
        if held.count == 0:
            del self.held[actor]
        assert lock.count == held.count or not self.reentrant

    def _release(self, lock: Any) -> str:
        try:
            lock.release()
        except LockLost:
            return "lost"
        return "ok"

    @rule(actor=st.sampled_from(actors), fault=FAULT)
    def extend(self, actor: str, fault: str) -> None:
        self.drop_gone()
        if actor not in self.held or actor == "C":
            return
        self.arm(fault)
        ok, _ = self.call(self.locks[actor].extend)
        if ok:
            held = self.held[actor]
            held.granted_at, held.sent_at = time.monotonic(), self.sent_at

    @precondition(lambda self: self.expires < MAX_EXPIRES)
    @rule()
    def expire(self) -> None:
        self.wait_expiry()
        self.drop_gone()

    @invariant()
    def redis_agrees(self) -> None:
        self.drop_gone()
        key = lock_key(self.backend, self.name, "l")
        data = self.raw.hgetall(key)
        assert len(self.held) <= 1, f"two holders at once: {list(self.held)}"
        for actor, held in self.held.items():
            if not held.certain():
                continue
            assert data.get(b"f") is not None, f"{actor} holds but Redis has nothing"
            assert int(data[b"f"]) == held.fence, f"{actor}: fence {held.fence}, Redis {data}"
            if self.reentrant:
                assert int(data.get(b"n", 1)) == held.count, f"{actor}: count {held.count}, {data}"
        if not self.held and not self.live_phantoms():
            assert not data, f"Redis holds what nobody owns: {data}"


class ReentrantModel(MutexModel):
    reentrant = True


class RWModel(LockModel):
    """Readers and writers of one read-write lock; W2's and R2's holds are short."""

    def __init__(self) -> None:
        super().__init__()
        self.rw = self.backend.read_write_lock(self.name)
        self.writer: tuple[str, Held] | None = None
        self.readers: dict[str, Held] = {}

    def drop_gone(self) -> None:
        if self.writer is not None and self.writer[1].surely_gone():
            self.writer = None
        for actor, held in list(self.readers.items()):
            if held.surely_gone():
                del self.readers[actor]

    @rule(actor=st.sampled_from(("R1", "R2")), fault=FAULT)
    def read(self, actor: str, fault: str) -> None:
        self.drop_gone()
        if actor in self.readers:
            return
        short = actor == "R2"
        reader = self.rw.read(ttl=SHORT_TTL if short else LONG_TTL)
        self.arm(fault)
        ok, result = self.call(reader.acquire, False)
        if not ok:
            assert not reader.held_by_me()
            self.phantom(short)
            return
        if self.writer is not None and self.writer[1].certain():
            assert result is False, "a reader got in while a writer certainly holds"
        elif self.writer is None and not self.live_phantoms():
            assert result is True, "a reader was refused with no writer"
        if result:
            self.writer = None
            self.new_fence(reader.fence)
            self.readers[actor] = Held(
                reader, reader.fence, short, time.monotonic(), sent_at=self.sent_at
            )

    @rule(actor=st.sampled_from(("W1", "W2")), fault=FAULT)
    def write(self, actor: str, fault: str) -> None:
        self.drop_gone()
        if self.writer is not None and self.writer[0] == actor:
            return
        short = actor == "W2"
        writer = self.rw.write(ttl=SHORT_TTL if short else LONG_TTL)
        self.arm(fault)
        ok, result = self.call(writer.acquire, False)
        if not ok:
            assert not writer.held_by_me()
            self.phantom(short)
            return
        busy = list(self.readers.values()) + ([self.writer[1]] if self.writer else [])
        if any(h.certain() for h in busy):
            assert result is False, "a writer got in while a hold certainly stands"
        elif not busy and not self.live_phantoms():
            assert result is True, "a writer was refused on a free lock"
        if result:
            self.readers.clear()
            self.new_fence(writer.fence)
            self.writer = (
                actor,
                Held(writer, writer.fence, short, time.monotonic(), sent_at=self.sent_at),
            )

    @rule(fault=FAULT)
    def downgrade(self, fault: str) -> None:
        self.drop_gone()
        if self.writer is None:
            return
        actor, held = self.writer
        self.arm(fault)
        ok, result = self.call(self._downgrade, held.obj)
        self.writer = None
        if not ok:
            assert not held.obj.held_by_me(), "a failed downgrade still holds the write lock"
            self.phantom(held.short)
            return
        if result is None:
            assert not held.certain(), "a certain write hold could not downgrade"
            return
        assert result.fence == held.fence, "a downgrade changed the fence"
        self.readers[f"{actor}-read"] = Held(
            result, held.fence, held.short, time.monotonic(), sent_at=self.sent_at
        )

    def _downgrade(self, writer: Any) -> Any:
        try:
            return writer.downgrade()
        except LockLost:
            return None

    @rule(which=st.sampled_from(("W", "R1", "R2", "W1-read", "W2-read")), fault=FAULT)
    def release(self, which: str, fault: str) -> None:
        self.drop_gone()
        if which == "W":
            if self.writer is None:
                return
            held = self.writer[1]
            self.writer = None
        elif which in self.readers:
            held = self.readers.pop(which)
        else:
            return
        self.arm(fault)
        ok, _ = self.call(self._release, held.obj)
        if not ok:
            assert not held.obj.held_by_me(), "a failed release still holds"
            self.phantom(held.short)

    def _release(self, obj: Any) -> None:
        with contextlib.suppress(LockLost):
            obj.release()

    @precondition(lambda self: self.expires < MAX_EXPIRES)
    @rule()
    def expire(self) -> None:
        self.wait_expiry()
        self.drop_gone()

    @invariant()
    def redis_agrees(self) -> None:
        self.drop_gone()
        writer = self.raw.hgetall(lock_key(self.backend, self.name, "rw"))
        now = self.redis_now_ms()
        live_readers = self.raw.zrangebyscore(lock_key(self.backend, self.name, "rr"), now, "+inf")
        assert not (self.writer and self.readers), "the model has a writer and readers"
        assert not (writer and live_readers), f"Redis has a writer and readers: {writer}"
        if self.writer is not None and self.writer[1].certain():
            assert writer and int(writer[b"f"]) == self.writer[1].fence, f"writer: {writer}"
        certain = [h for h in self.readers.values() if h.certain()]
        assert len(live_readers) >= len(certain), f"readers {live_readers}"
        if not self.live_phantoms():
            if self.writer is None:
                assert not writer, f"Redis holds a writer nobody owns: {writer}"
            assert len(live_readers) <= len(self.readers), f"orphan readers: {live_readers}"


MODELS = {"mutex": MutexModel, "reentrant": ReentrantModel, "rw": RWModel}


def run_model(model: str, target: ProxiedTarget, faults: bool, examples: int) -> None:
    machine = type(
        f"{MODELS[model].__name__}On{target.kind.title()}",
        (MODELS[model],),
        {"target": target, "faults_on": faults},
    )
    config = settings(
        max_examples=examples,
        stateful_step_count=10,
        deadline=None,
        derandomize=True,
        database=None,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    run_state_machine_as_test(machine, settings=config)


@pytest.mark.parametrize("kind", ["single", "cluster"])
@pytest.mark.parametrize("model", list(MODELS))
def test_lock_model(model: str, kind: str, request: pytest.FixtureRequest) -> None:
    target: ProxiedTarget = request.getfixturevalue(f"proxied_{kind}")
    run_model(model, target, faults=False, examples=4)


@pytest.mark.parametrize("kind", ["single", "cluster"])
@pytest.mark.parametrize("model", list(MODELS))
def test_lock_model_with_lost_replies_and_resends(
    model: str, kind: str, request: pytest.FixtureRequest
) -> None:
    target: ProxiedTarget = request.getfixturevalue(f"proxied_{kind}")
    run_model(model, target, faults=True, examples=8)
