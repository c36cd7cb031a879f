"""A workflow member removed while it waited in the queue ends its step at once, in the
script that removes it (single server and cluster): cancel, remove, the admin's delete."""

from __future__ import annotations

import time

import pytest
from django.test import override_settings

from django_redislock import chain, chord
from django_redislock.admin import data
from django_redislock.exceptions import TaskFailed

from . import test_workflows
from . import workflow_tasks as wt
from .conftest import RedisTarget
from .test_workflows import drain, runs_of, wf

pytestmark = pytest.mark.django_db(transaction=True)

#: The workflow tests' server fixture (single and cluster, retries 10 ms apart, queue purged).
real = test_workflows.real


def test_a_cancelled_queued_chain_step_fails_the_chain_at_once(real: RedisTarget) -> None:
    handle = chain(wt.add.s(1, 2), wt.double.s(), wt.add.s(10)).delay()
    [first] = handle.task_ids
    assert wf().cancel(first, "not wanted") == "removed"
    info = handle.info()
    assert (info["state"], info["failed_id"]) == ("FAILED", first)
    assert "not wanted" in info["error"]
    assert wf().cancel(first) == "finished"  # a resend changes nothing
    drain()
    assert wt.runs() == []  # the later steps were never queued
    with pytest.raises(TaskFailed) as failed:
        handle.result(1)
    assert failed.value.task_id == first


def test_a_removed_chord_member_fails_the_chord_without_its_callback(real: RedisTarget) -> None:
    handle = chord([wt.square.s(i) for i in range(3)], wt.collect.s("gone")).delay()
    assert wf().remove(handle.task_ids[1]) is True
    assert handle.state == "FAILED"
    assert handle.failed_id == handle.task_ids[1]
    drain()
    assert runs_of("collect:") == []
    assert len(runs_of("square:")) == 2


def test_a_cancelled_member_of_an_allow_failure_chord_is_passed_as_failed(
    real: RedisTarget,
) -> None:
    handle = chord(
        [wt.square.s(i) for i in range(3)], wt.collect.s("allow"), allow_failure=True
    ).delay()
    assert wf().cancel(handle.task_ids[0], "skip it") == "removed"
    assert handle.state == "RUNNING"  # counted: the other two members still run
    drain()
    assert runs_of("collect:") == ["collect:allow:['TaskFailed', 1, 4]"]
    assert handle.result(10) == 5


def test_a_cancelled_dependency_cancels_its_dependents_at_once(real: RedisTarget) -> None:
    dep = wt.note.s("dep").delay()
    child = wt.note.s("child").delay(depends_on=[dep])
    assert wf().cancel(dep.task_ids[0]) == "removed"
    assert dep.state == "FAILED"
    assert child.state == "CANCELLED"
    assert dep in child.error
    drain()
    assert wt.runs() == []


def test_the_admins_delete_of_a_queued_member_ends_its_workflow(real: RedisTarget) -> None:
    handle = chain(wt.add.s(1, 2), wt.double.s()).delay()
    [first] = handle.task_ids
    task = wf().get(first)
    assert task is not None
    assert data.act(wf(), "delete", [(first, 1, task.score)]) == [data.DONE]
    assert (handle.state, handle.failed_id) == ("FAILED", first)
    assert "deleted" in handle.error
    drain()
    assert wt.runs() == []


def test_removing_a_plain_task_changes_no_workflow(real: RedisTarget) -> None:
    """The path stays as it was for a task outside any workflow."""
    sent = wt.note.delay("plain")
    assert wf().cancel(sent) == "removed"
    assert wf().cancel(sent) == "finished"
    assert wf().stats()["ready"] == 0


def test_a_pickled_member_is_read_without_loading_any_class(real: RedisTarget) -> None:
    """On a pickle queue the member's workflow is read by an unpickler that refuses every
    global (the admin's web process never loads a pickle): plain arguments are read and the
    chain fails at once; a member whose arguments need a class is left as it was (its
    workflow waits), and no class of it was loaded."""
    import datetime

    from django_redislock.queue.workflows import stored_mark

    params = {**real.params(), "KEY_PREFIX": "test"}
    params["OPTIONS"] = {**params["OPTIONS"], "SERIALIZER": "pickle"}
    with override_settings(REDISLOCK_QUEUES={"default": params}):
        handle = chain(wt.add.s(1, 2), wt.double.s()).delay()
        [first] = handle.task_ids
        assert wf().cancel(first) == "removed"
        assert (handle.state, handle.failed_id) == ("FAILED", first)
        dated = chain(wt.note.s(datetime.date(2026, 11, 29)), wt.double.s()).delay()
        task = wf().get(dated.task_ids[0])
        assert task is not None
        assert stored_mark(wf(), task.raw_payload, task.id) is None  # needs datetime.date
        assert wf().cancel(dated.task_ids[0]) == "removed"
        assert dated.state == "RUNNING"  # the documented limit: its workflow was not read
        wf().purge()


def test_a_copy_replaced_since_it_was_read_is_not_removed(real: RedisTarget) -> None:
    """The cancel script removes only the copy the caller read (its enqueue time): a copy
    sent again since (``replace=True``) is left queued, and ``cancel`` reads it again."""
    handle = chain(wt.add.s(1, 2), wt.double.s()).delay()
    [first] = handle.task_ids
    seen = wf().get(first)
    assert seen is not None
    time.sleep(0.01)
    wf().enqueue(first, seen.payload, replace=True)  # a new copy, a new enqueue time
    assert wf()._run(wf()._cancel_call(first, "stale", seen)) == "changed"
    assert wf().get(first) is not None and handle.state == "RUNNING"
    assert wf().cancel(first) == "removed"  # read again: the new copy, its workflow ended
    assert handle.state == "FAILED"
