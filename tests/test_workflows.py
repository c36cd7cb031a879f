"""Chains, groups, chords and dependencies with in-process burst workers (single, cluster)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from django.test import override_settings

from django_redislock import chain, chord, group, queues
from django_redislock.exceptions import InvalidArgument, TaskFailed
from django_redislock.queue import Queue
from django_redislock.queue.canvas import WorkflowHandle
from django_redislock.queue.worker import Worker

from . import workflow_tasks as wt
from .conftest import RedisTarget
from .writer_race import closed_under_send, evalsha_of

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(params=["single", "cluster"])
def real(request: pytest.FixtureRequest) -> Iterator[RedisTarget]:
    target: RedisTarget = request.getfixturevalue(f"{request.param}_target")
    params = target.params()
    options = {**params.get("OPTIONS", {}), "RETRY_BACKOFF": 0.01, "RETRY_BACKOFF_MAX": 0.01}
    params = {**params, "KEY_PREFIX": "test", "OPTIONS": options}
    with override_settings(REDISLOCK_QUEUES={"default": params}):
        queues["default"].queue("wf").purge()
        queues["default"].client.delete(wt.RUNS_KEY)  # type: ignore[attr-defined]
        yield target


def wf() -> Queue:
    found: Queue = queues["default"].queue("wf")
    return found


def drain(pool: str = "solo") -> None:
    """Burst workers until nothing is ready or delayed (bounded rounds)."""
    for _ in range(100):
        Worker([wf()], burst=True, timeout=30, pool=pool).run()
        stats = wf().stats()
        if not stats["ready"] + stats["delayed"] + stats["in_flight"]:
            return
        time.sleep(0.02)
    raise AssertionError("the queue was not drained in 100 rounds")


def runs_of(prefix: str) -> list[str]:
    return [r for r in wt.runs() if r.startswith(prefix)]


def test_chain_passes_each_result_to_the_next_step(real: RedisTarget) -> None:
    handle = chain(wt.add.s(1, 2), wt.double.s(), wt.add.s(10)).delay()
    assert isinstance(handle, WorkflowHandle)
    assert handle.state == "RUNNING"
    drain()
    assert wt.runs() == ["add:1:2", "double:3", "add:6:10"]
    assert handle.state == "SUCCESSFUL"
    assert handle.result(10) == 16


@pytest.mark.parametrize("pool", ["solo", "async"])
def test_a_failed_step_stops_the_chain_and_names_the_step(real: RedisTarget, pool: str) -> None:
    failing = wt.boom.s()
    handle = chain(wt.add.s(1, 2), failing, wt.double.s()).delay()
    drain(pool)
    assert wt.runs() == ["add:1:2", "boom:3"]  # double never ran
    info = handle.info()
    assert info["state"] == "FAILED"
    assert info["failed_id"] == failing.id
    assert "ValueError: boom 3" in info["error"]
    with pytest.raises(TaskFailed) as caught:
        handle.result(1)
    assert caught.value.task_id == failing.id
    assert wf().get(failing.id) is not None  # the failed step is dead-lettered, as any task


def test_group_result_is_the_member_results_in_order(real: RedisTarget) -> None:
    handle = group(wt.square.s(i) for i in range(6)).delay()
    drain()
    assert handle.result(10) == [0, 1, 4, 9, 16, 25]


@pytest.mark.parametrize("pool", ["solo", "thread", "async"])
def test_chord_callback_gets_member_results_in_member_order_once(
    real: RedisTarget, pool: str
) -> None:
    handle = chord(group(wt.square.s(i) for i in range(8)), wt.collect.s("c1")).delay()
    drain(pool)
    assert runs_of("collect:") == [f"collect:c1:{[i * i for i in range(8)]}"]
    assert handle.result(10) == sum(i * i for i in range(8))


def test_a_member_whose_connection_closed_under_its_end_is_counted_once(
    real: RedisTarget,
) -> None:
    """redis-py's writer race on the async pool: a member's ``workflow_done`` call meets an
    asyncio connection closed under its send (``AttributeError`` from redis-py, see
    ``tests/writer_race.py``). The call is sent again, as after a dropped connection: the
    member is not left to its lease, and the callback runs once, within the drain."""
    handle = chord(group(wt.square.s(i) for i in range(8)), wt.collect.s("c6")).delay()
    with closed_under_send(evalsha_of("workflow_done")) as hit:
        drain("async")
    assert len(hit) == 1
    assert sorted(run.split(":")[1] for run in runs_of("square:")) == sorted(
        str(i) for i in range(8)
    )
    assert runs_of("collect:") == [f"collect:c6:{[i * i for i in range(8)]}"]
    assert handle.result(10) == sum(i * i for i in range(8))


def test_chord_member_failure_fails_it_and_skips_the_callback(real: RedisTarget) -> None:
    bad = wt.boom.s(5)
    handle = chord([wt.square.s(1), bad, wt.square.s(2)], wt.collect.s("c2")).delay()
    drain()
    assert runs_of("collect:") == []
    info = handle.info()
    assert (info["state"], info["failed_id"]) == ("FAILED", bad.id)
    assert "boom 5" in info["error"]


def test_chord_allow_failure_passes_the_error_through(real: RedisTarget) -> None:
    members = [wt.square.s(1), wt.boom.s(5), wt.square.s(2)]
    handle = chord(members, wt.collect.s("c3"), allow_failure=True).delay()
    drain()
    assert runs_of("collect:") == ["collect:c3:[1, 'TaskFailed', 4]"]
    assert handle.result(10) == 5


def test_a_retried_member_is_counted_once_by_its_final_outcome(real: RedisTarget) -> None:
    handle = chord([wt.flaky.s(i, "r") for i in range(4)], wt.collect.s("c4")).delay()
    drain()
    assert sorted(runs_of("flaky:")) == sorted(
        [f"flaky:r:{i}:{n}" for i in range(4) for n in (1, 2)]
    )
    assert runs_of("collect:") == ["collect:c4:[0, 1, 4, 9]"]
    assert handle.result(10) == 14


def test_dependency_defers_until_it_succeeded(real: RedisTarget) -> None:
    first = wt.note.s("first").delay()
    second = wt.note.delay("second", depends_on=[first])  # type: ignore[call-arg]
    assert isinstance(second, WorkflowHandle)  # (typed code: note.s("second").delay(...))
    assert isinstance(second, WorkflowHandle)
    assert second.info()["deferred"] is True
    assert wf().stats()["ready"] == 1  # only the first
    drain()
    assert runs_of("note:") == ["note:first", "note:second"]
    assert second.result(10) == "second"
    late = wt.note.s("late").delay(depends_on=[first, second])  # both succeeded: queued now
    assert late.info()["deferred"] is False
    drain()
    assert late.result(10) == "late"


def test_dependency_failure_cancels_the_dependents_in_turn(real: RedisTarget) -> None:
    failing = wt.boom.s("dep").delay()
    child = wt.note.s("child").delay(depends_on=[failing])
    grandchild = wt.note.s("grandchild").delay(depends_on=[child])
    drain()
    assert runs_of("note:") == []
    assert failing.state == "FAILED"
    assert child.state == "CANCELLED" and grandchild.state == "CANCELLED"
    assert failing in child.error
    with pytest.raises(TaskFailed):
        grandchild.result(1)
    after = wt.note.s("after").delay(depends_on=[failing])  # too late: cancelled at once
    assert after.state == "CANCELLED"


def test_dependencies_are_workflow_handles_on_the_same_queue(real: RedisTarget) -> None:
    with pytest.raises(InvalidArgument):
        wt.note.s("x").delay(depends_on=["not-a-handle"])  # type: ignore[list-item]
    assert wt.runs() == []


def test_the_done_script_counts_a_resent_end_once(real: RedisTarget) -> None:
    """Model of the chord counter: every member's end sent twice, in shuffled order, and
    ends sent for a stale claim: the callback is queued once, after the last member."""
    import random

    from django_redislock.queue.workflows import done_call, mark_of, run_call

    handle = chord([wt.square.s(i) for i in range(5)], wt.collect.s("m")).delay()
    claimed = wf().pop(5)
    assert len(claimed) == 5
    ends: list[Any] = []
    for task in claimed:
        mark = mark_of(task)
        assert mark is not None
        value = task.payload["args"][0] ** 2
        call = done_call(wf(), task, mark, wf().serializer.dumps(value))
        ends += [call, call]
    random.Random(7).shuffle(ends)
    counted = [run_call(wf(), call) for call in ends]
    assert sorted(counted) == [0] * 5 + [1] * 5
    assert wf().stats()["ready"] == 1  # the callback, once
    wf().ack(claimed)
    drain()
    assert runs_of("collect:") == ["collect:m:[0, 1, 4, 9, 16]"]
    assert handle.result(10) == 30


def test_a_handle_pickles_and_reads_the_same_workflow(real: RedisTarget) -> None:
    import pickle

    handle = group(wt.square.s(i) for i in range(3)).delay()
    copy = pickle.loads(pickle.dumps(handle))
    assert (copy, copy.queue_name, copy.kind, copy.task_ids) == (
        handle,
        handle.queue_name,
        handle.kind,
        handle.task_ids,
    )
    drain()
    assert copy.result(10) == [0, 1, 4]


def test_a_member_rerun_after_its_end_was_recorded_is_not_counted_again(
    real: RedisTarget,
) -> None:
    """A worker that recorded a member's end and died before its ack: the lease expires, the
    member is claimed again and ends again; the chord still counts it once."""
    from django_redislock.queue.workflows import done_call, mark_of, run_call

    handle = chord([wt.square.s(i) for i in range(3)], wt.collect.s("rerun")).delay()
    first = wf().pop(3, lease=0.3)
    for task in first[:2]:  # two ends recorded, then the worker "dies" (no ack)
        mark = mark_of(task)
        assert mark is not None
        data = wf().serializer.dumps(task.payload["args"][0] ** 2)
        assert run_call(wf(), done_call(wf(), task, mark, data)) == 1
    time.sleep(0.5)
    again = wf().pop(3, lease=30)  # the expired leases come back, under new claims
    assert sorted(t.id for t in again) == sorted(t.id for t in first)
    counted = []
    for task in again:
        mark = mark_of(task)
        assert mark is not None
        data = wf().serializer.dumps(task.payload["args"][0] ** 2)
        counted.append(run_call(wf(), done_call(wf(), task, mark, data)))
    assert sorted(counted) == [0, 0, 1]  # only the member that had not ended counts now
    for task in first:  # the dead worker's stale claims change nothing
        mark = mark_of(task)
        assert mark is not None
        assert run_call(wf(), done_call(wf(), task, mark, wf().serializer.dumps(0))) == 0
    wf().ack(again)
    drain()
    assert runs_of("collect:") == ["collect:rerun:[0, 1, 4]"]
    assert handle.result(10) == 5
