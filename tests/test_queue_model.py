"""The queue against a reference model (hypothesis stateful testing), on real servers.

Several workers claim, ack, retry, release, extend and start tasks; tasks are
enqueued with and without ``replace`` and with delays; leases expire (a
one-microsecond lease has expired by the next call); stale claims and resent
calls are replayed at random. After every step each task's state, attempts,
payload and priority level in Redis must equal the model's (and the priority
index must hold exactly the pending tasks of a level above 0), and every reply
must be the model's.

So: an acked task never returns, no task is lost, a stale claim changes
nothing, attempts equal the runs recorded as started, and a task's own
``max_attempts`` holds when its lease expires.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    invariant,
    multiple,
    rule,
    run_state_machine_as_test,
)

from django_redislock.queue import DEAD, DELAYED, IN_FLIGHT, READY, Queue, Task

from .conftest import RedisTarget, make_queue

IDS = ["a", "b", "c", "d"]
DEFAULT_MAX = 2
LONG = 600.0
SHORT = 0.000001  # expired by the next call: the model treats it as expired at the next claim
pytestmark = pytest.mark.slow


@dataclass
class Model:
    """One task as the model sees it."""

    state: str  # READY, DELAYED, IN_FLIGHT or DEAD
    payload: int
    attempts: int = 0
    token: str = ""
    started: bool = False
    limit: int = 0  # the max_attempts recorded at start (0: the default)
    short: bool = False
    suspect: bool = False
    priority: int = 0


@dataclass
class World:
    tasks: dict[str, Model] = field(default_factory=dict)
    version: int = 0


def machine_for(queue: Queue) -> type[RuleBasedStateMachine]:
    class QueueMachine(RuleBasedStateMachine):
        claims = Bundle("claims")

        def __init__(self) -> None:
            super().__init__()
            queue.purge()
            self.world = World()

        # -- producers --------------------------------------------------------------

        @rule(
            id=st.sampled_from(IDS),
            replace=st.booleans(),
            delayed=st.booleans(),
            priority=st.sampled_from([0, 0, 4, 9]),
        )
        def enqueue(self, id: str, replace: bool, delayed: bool, priority: int) -> None:
            self.world.version += 1
            entry = queue.prepare(id, self.world.version, 3600 if delayed else 0)
            call = queue._enqueue_call([entry], replace, priority)
            [got] = queue._run(call)
            if replace:  # resent: answers the same and changes nothing
                assert queue._run(call) == [got]
            known = self.world.tasks.get(id)
            live = known is not None and known.state != DEAD
            if live and not replace:
                assert got is False
                return
            assert got is True
            state = DELAYED if delayed else READY
            self.world.tasks[id] = Model(state, self.world.version, priority=priority)

        @rule()
        def requeue_dead(self) -> None:
            dead = [m for m in self.world.tasks.values() if m.state == DEAD]
            assert queue.requeue_dead() == len(dead)
            for model in dead:
                model.state, model.attempts, model.suspect = READY, 0, False

        # -- workers ------------------------------------------------------------------

        @rule(target=claims, short=st.booleans(), start=st.booleans(), resend=st.booleans())
        def claim(self, short: bool, start: bool, resend: bool) -> Any:
            self._expire()
            call = queue._claim_call(50, SHORT if short else LONG, [], start)
            claim = queue._run(call)
            if resend:  # the same request again (a client retry after a lost reply)
                again = queue._run(call)
                assert [(t.id, t.claim, t.attempts, t.priority) for t in again.tasks] == [
                    (t.id, t.claim, t.attempts, t.priority) for t in claim.tasks
                ]
            due = sorted(i for i, m in self.world.tasks.items() if m.state == READY)
            assert sorted(t.id for t in claim.tasks) == due
            levels = [t.priority for t in claim.tasks]  # highest level first
            assert levels == sorted(levels, reverse=True)
            for task in claim.tasks:
                model = self.world.tasks[task.id]
                assert task.payload == model.payload
                assert task.attempts == model.attempts + 1
                assert task.suspect == model.suspect
                assert task.priority == model.priority
                model.state, model.token, model.short = IN_FLIGHT, task.claim, short
                model.started, model.limit, model.suspect = start, 0, False
                if start:
                    model.attempts += 1
            return multiple(*claim.tasks)

        def _expire(self) -> None:
            for model in self.world.tasks.values():
                if model.state == IN_FLIGHT and model.short:
                    if model.started and model.attempts >= (model.limit or DEFAULT_MAX):
                        model.state = DEAD
                    else:
                        model.state, model.suspect = READY, True
                    model.token, model.started = "", False

        def _current(self, task: Task) -> Model | None:
            model = self.world.tasks.get(task.id)
            if model is None or model.state != IN_FLIGHT or model.token != task.claim:
                return None
            return model

        @rule(handle=claims)
        def ack(self, handle: Task) -> None:
            self._ack(handle)

        def _ack(self, task: Task) -> None:
            model = self._current(task)
            assert queue.ack(task) == (1 if model else 0)
            if model:
                del self.world.tasks[task.id]

        @rule(handle=claims, limit=st.integers(1, 3))
        def retry(self, handle: Task, limit: int) -> None:
            model = self._current(handle)
            outcome = queue.retry(handle, delay=0, error="x", max_attempts=limit)
            if model is None:
                assert outcome == "lost"
                return
            if not model.started:
                model.attempts += 1
            model.token, model.started, model.suspect = "", False, False
            if model.attempts >= limit:
                assert outcome == "dead"
                model.state = DEAD
            else:
                assert outcome == "retried"
                model.state = READY

        @rule(handle=claims)
        def release(self, handle: Task) -> None:
            model = self._current(handle)
            assert queue.release([handle]) == (1 if model else 0)
            if model:
                if model.started:
                    model.attempts -= 1
                model.state, model.token, model.started, model.suspect = READY, "", False, False

        @rule(handle=claims, short=st.booleans())
        def extend(self, handle: Task, short: bool) -> None:
            model = self._current(handle)
            assert queue.extend_lease(handle, SHORT if short else LONG) is (model is not None)
            if model:
                model.short = short

        @rule(handle=claims, limit=st.sampled_from([None, 1, 3]))
        def start(self, handle: Task, limit: int | None) -> None:
            model = self._current(handle)
            assert queue.start(handle, LONG, limit) is (model is not None)
            if model:
                model.short = False
                if not model.started:
                    model.started, model.limit = True, limit or 0
                    model.attempts += 1

        @rule(handle=claims)
        def resend_ack(self, handle: Task) -> None:
            """An ack sent twice (a client that retried after a lost reply): once is enough."""
            self._ack(handle)
            self._ack(handle)

        # -- what Redis holds ------------------------------------------------------------

        @invariant()
        def redis_matches_the_model(self) -> None:
            for id in IDS:
                found = queue.get(id)
                model = self.world.tasks.get(id)
                if model is None:
                    assert found is None, id
                    continue
                assert found is not None, id
                assert found.enqueued_at is not None, id
                assert (found.state, found.payload, found.attempts, found.priority) == (
                    model.state,
                    model.payload,
                    model.attempts,
                    model.priority,
                ), id
            client: Any = queue.backend.client
            index, levels = queue.priority_keys
            pending = (READY, DELAYED)
            assert {m.decode() for m in client.zrange(index, 0, -1)} == {
                i for i, m in self.world.tasks.items() if m.priority and m.state in pending
            }
            assert {k.decode(): int(v) for k, v in client.hgetall(levels).items()} == {
                i: m.priority for i, m in self.world.tasks.items() if m.priority
            }
            # one enqueue time per queued task, none left behind by any way out
            assert {k.decode() for k in client.hkeys(queue.enqueued_key)} == set(self.world.tasks)

    return QueueMachine


@pytest.mark.parametrize("kind", ["single", "cluster"])
def test_the_queue_follows_its_model(request: pytest.FixtureRequest, kind: str) -> None:
    target: RedisTarget = request.getfixturevalue(f"{kind}_target")
    queue = make_queue(target, "model", MAX_ATTEMPTS=DEFAULT_MAX)
    machine = machine_for(queue)
    run_state_machine_as_test(
        machine,
        settings=settings(
            max_examples=200 if kind == "single" else 60,
            stateful_step_count=30,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            database=None,
        ),
    )
