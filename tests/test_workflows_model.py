"""The chord and dependency counters against a reference model (hypothesis stateful), on
fakeredis, a real server and a real cluster.

Each example sends a chord (2 to 4 members, ``allow_failure`` on or off), a single task,
a two-step chain, and two dependents: ``d1`` waits for the chord, ``d2`` for the chord and
the single task. The steps are what workers and operators do, with the scripts the worker
sends, called directly: claim the ready tasks; end a claimed task well (``workflow_done``)
with or without its ack, or dead-letter it (``queue_retry``), each call resent at random
(a lost reply sent again); retry a task (back to the queue, nothing counted); send an end
for a claim that is no longer current; cancel a queued task (its step ends as failed) or
ask a running one to stop (nothing ends yet).

After every step, every task is where the model says (ready, in flight, dead, or gone),
every workflow's state is the model's, the queue holds no task the model does not, and:
a chord's callback was queued iff every member ended (all well, or ``allow_failure``), a
dependent was released iff every workflow it waits for succeeded, and is cancelled iff one
of them failed first.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.test import override_settings
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from django_redislock import chain, chord, queues
from django_redislock.queue import DEAD, IN_FLIGHT, READY, Queue, Task
from django_redislock.queue.workflows import done_call, mark_of, run_call

from . import workflow_tasks as wt
from .conftest import RedisTarget

pytestmark = pytest.mark.timeout(300)

RUNNING, SUCCESSFUL, FAILED, CANCELLED = "RUNNING", "SUCCESSFUL", "FAILED", "CANCELLED"
#: Where the model keeps a task, and the state the queue reports for it (None: not there).
SHOWN = {"pending": READY, "flight": IN_FLIGHT, "dead": DEAD, "done": None, "removed": None}


def wf() -> Queue:
    found: Queue = queues["default"].queue("wf")
    return found


class WorkflowModel(RuleBasedStateMachine):
    #: False on fakeredis: its Lua has no cmsgpack, which workflow_start.lua packs a deferred
    #: workflow's tasks with (so the dependents d1, d2 are left out there)
    deps = True

    @initialize(n=st.integers(min_value=2, max_value=4), allow=st.booleans())
    def send(self, n: int, allow: bool) -> None:
        self.q = wf()
        self.q.purge()
        self.allow = allow
        members = [wt.square.s(i) for i in range(n)]
        callback = wt.collect.s("model")
        steps = [wt.add.s(1, 2), wt.double.s()]
        single, d1, d2 = wt.note.s("single"), wt.note.s("d1"), wt.note.s("d2")
        self.handles = {"chord": chord(members, callback, allow_failure=allow).delay()}
        self.handles["single"] = single.delay()
        self.handles["chain"] = chain(*steps).delay()
        self.waits = {"d1": ["chord"], "d2": ["chord", "single"]} if self.deps else {}
        for name, waits in self.waits.items():
            sig = d1 if name == "d1" else d2
            self.handles[name] = sig.delay(depends_on=[self.handles[w] for w in waits])
        #: task id -> (its workflow, its role: "member", "callback", "step0", "step1", "task")
        self.role = {m.id: ("chord", "member") for m in members}
        self.role[callback.id] = ("chord", "callback")
        self.role[steps[0].id], self.role[steps[1].id] = ("chain", "step0"), ("chain", "step1")
        for name, sig in (("single", single), ("d1", d1), ("d2", d2)):
            if name in self.handles:
                self.role[sig.id] = (name, "task")
        self.members = [m.id for m in members]
        self.callback, self.next_step = callback.id, steps[1].id
        self.task_of = {"d1": d1.id, "d2": d2.id}
        self.state = dict.fromkeys(self.handles, RUNNING)
        self.released: set[str] = set()  # dependents whose task was queued
        self.where: dict[str, str] = {}  # task id -> pending, flight, dead, done, removed
        for id in (*self.members, single.id, steps[0].id):
            self.where[id] = "pending"
        self.ends: dict[str, bool] = {}  # task id -> its counted end (True: well)
        self.claims: dict[str, Task] = {}  # task id -> its current claim
        self.stale: list[Task] = []  # claims no longer current
        self.queued_callback = 0

    # the model's side of the workflow fragment
    def queue_task(self, id: str) -> None:
        assert id not in self.where, f"{id} queued twice"
        self.where[id] = "pending"
        if id == self.callback:
            self.queued_callback += 1

    def succeed(self, name: str) -> None:
        self.state[name] = SUCCESSFUL
        for dep, waits in self.waits.items():
            if (
                name in waits
                and self.state[dep] == RUNNING
                and dep not in self.released
                and all(self.state[w] == SUCCESSFUL for w in waits)
            ):
                self.released.add(dep)
                self.queue_task(self.task_of[dep])

    def fail(self, name: str) -> None:
        self.state[name] = FAILED
        for dep, waits in self.waits.items():
            if name in waits and self.state[dep] == RUNNING and dep not in self.released:
                self.state[dep] = CANCELLED

    def end(self, id: str, ok: bool) -> bool:
        """Member ``id`` ended (``ok``: well); False when its end was counted already."""
        if id in self.ends:
            return False
        self.ends[id] = ok
        name, role = self.role[id]
        if self.state[name] != RUNNING:
            return True
        if role == "member":
            if not ok and not self.allow:
                self.fail(name)
            elif all(m in self.ends for m in self.members):
                self.queue_task(self.callback)
        elif not ok:
            self.fail(name)
        elif role == "step0":
            self.queue_task(self.next_step)
        else:
            self.succeed(name)
        return True

    def ids(self, where: str) -> list[str]:
        """The tasks at ``where``, in an order that does not depend on their random ids (so
        hypothesis picks the same task when it replays an example)."""
        return sorted((id for id, at in self.where.items() if at == where), key=self.label)

    def label(self, id: str) -> str:
        name, role = self.role[id]
        return f"{name}:{role}:{self.members.index(id) if id in self.members else 0}"

    # the steps
    @rule()
    def claim(self) -> None:
        claimed = self.q.pop(20, lease=600)
        assert sorted((t.id for t in claimed), key=self.label) == self.ids("pending")
        for task in claimed:
            self.where[task.id] = "flight"
            self.claims[task.id] = task

    @precondition(lambda self: self.ids("flight"))
    @rule(data=st.data(), ack=st.booleans(), resend=st.booleans())
    def end_well(self, data: st.DataObject, ack: bool, resend: bool) -> None:
        id = data.draw(st.sampled_from(self.ids("flight")))
        task = self.claims[id]
        mark = mark_of(task)
        assert mark is not None
        call = done_call(self.q, task, mark, self.q.serializer.dumps(7))
        counted = self.end(id, True)
        assert run_call(self.q, call) == int(counted)
        if resend:  # its reply was lost: the same call again counts nothing
            assert run_call(self.q, call) == 0
        if ack:  # else the worker died before its ack: the task stays in flight, counted
            assert self.q.ack(task) == 1
            self.where[id] = "done"
            del self.claims[id]
            self.stale.append(task)

    @precondition(lambda self: self.ids("flight"))
    @rule(data=st.data(), resend=st.booleans())
    def dead_letter(self, data: st.DataObject, resend: bool) -> None:
        id = data.draw(st.sampled_from(self.ids("flight")))
        task = self.claims.pop(id)
        assert self.q.retry(task, 0, "it failed", 1) == "dead"
        self.where[id] = "dead"
        self.end(id, False)
        self.stale.append(task)
        if resend:
            assert self.q.retry(task, 0, "it failed", 1) == "lost"

    @precondition(lambda self: self.ids("flight"))
    @rule(data=st.data())
    def retry(self, data: st.DataObject) -> None:
        id = data.draw(st.sampled_from(self.ids("flight")))
        task = self.claims.pop(id)
        assert self.q.retry(task, 0, "try again", 100) == "retried"
        self.where[id] = "pending"
        self.stale.append(task)

    @precondition(lambda self: self.stale)
    @rule(data=st.data())
    def stale_end(self, data: st.DataObject) -> None:
        task = data.draw(st.sampled_from(self.stale))
        mark = mark_of(task)
        assert mark is not None
        call = done_call(self.q, task, mark, self.q.serializer.dumps(0))
        # its end was counted already, or another claim (or queued copy) is current
        assert run_call(self.q, call) == 0

    @precondition(lambda self: self.ids("pending"))
    @rule(data=st.data(), resend=st.booleans())
    def cancel_queued(self, data: st.DataObject, resend: bool) -> None:
        id = data.draw(st.sampled_from(self.ids("pending")))
        assert self.q.cancel(id, "operator") == "removed"
        self.where[id] = "removed"
        self.end(id, False)
        if resend:
            assert self.q.cancel(id, "operator") == "finished"

    @precondition(lambda self: self.ids("flight"))
    @rule(data=st.data())
    def cancel_running(self, data: st.DataObject) -> None:
        id = data.draw(st.sampled_from(self.ids("flight")))
        assert self.q.cancel(id, "operator") == "requested"  # its worker ends it later

    # what must hold after every step
    @invariant()
    def tasks_are_where_the_model_says(self) -> None:
        if not hasattr(self, "q"):
            return
        for id, at in self.where.items():
            found = self.q.get(id)
            assert (None if found is None else found.state) == SHOWN[at], (id, at)
        for id in self.role.keys() - self.where.keys():  # never queued
            assert self.q.get(id) is None, id
        stats = self.q.stats()
        counts = (stats["ready"] + stats["delayed"], stats["in_flight"], stats["dead"])
        assert counts == tuple(len(self.ids(w)) for w in ("pending", "flight", "dead"))

    @invariant()
    def workflows_are_in_the_models_state(self) -> None:
        if not hasattr(self, "q"):
            return
        assert {name: h.state for name, h in self.handles.items()} == self.state

    @invariant()
    def the_callback_is_queued_once_iff_every_member_ended(self) -> None:
        if not hasattr(self, "q"):
            return
        ended = [self.ends.get(m) for m in self.members]
        expected = None not in ended and (self.allow or all(ended))
        assert self.queued_callback == int(expected)

    @invariant()
    def dependents_are_released_iff_their_dependencies_succeeded(self) -> None:
        if not hasattr(self, "q"):
            return
        for dep, waits in self.waits.items():
            states = [self.state[w] for w in waits]
            assert (dep in self.released) == all(s == SUCCESSFUL for s in states)
            if FAILED in states and dep not in self.released:
                assert self.state[dep] == CANCELLED


@pytest.fixture(params=["fakeredis", "single", "cluster"])
def target(request: pytest.FixtureRequest) -> Iterator[RedisTarget]:
    found: RedisTarget = request.getfixturevalue(f"{request.param}_target")
    params: dict[str, Any] = {**found.params(), "KEY_PREFIX": "test"}
    with override_settings(REDISLOCK_QUEUES={"default": params}):
        yield found


def test_the_workflow_counters_follow_their_model(target: RedisTarget) -> None:
    WorkflowModel.deps = target.kind != "fakeredis"
    run_state_machine_as_test(
        WorkflowModel,
        settings=settings(
            max_examples=20,
            stateful_step_count=25,
            deadline=None,
            database=None,  # the model differs per kind (deps): no example replayed across
            suppress_health_check=list(HealthCheck),
        ),
    )
