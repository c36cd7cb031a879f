"""Concurrency groups (issue 29, item 4): ``@task(group_key=..., group_concurrency=,
group_rate_limit=)``: limits hold, groups take turns, every end of a run gives the slot back,
bad options fail early; on fakeredis, a real server and a real cluster (``redis_target``)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from django.test import override_settings

from django_redislock import queues
from django_redislock.exceptions import InvalidArgument
from django_redislock.queue import DEAD, Queue, Task
from django_redislock.queue.task_function import TaskFunction

from .conftest import RedisTarget


def tenant_task(**options: Any) -> TaskFunction[..., Any]:
    def work(tenant: str, n: int = 0) -> None:
        del tenant, n

    work.__qualname__ = "work"
    group_options = {"group_key": lambda tenant, *_a, **_kw: tenant, **options}
    return TaskFunction(work, queue="grouped", name="tests.groups.work", **group_options)


@pytest.fixture
def alias(redis_target: RedisTarget) -> Iterator[RedisTarget]:
    params = {**redis_target.params(RETRY_JITTER=False), "KEY_PREFIX": "grp"}
    with override_settings(REDISLOCK_QUEUES={"default": params}):
        yield redis_target


def grouped() -> Queue:
    found: Queue = queues["default"].queue("grouped")
    return found


def tenants(tasks: list[Task]) -> list[str]:
    return [task.payload["args"][0] for task in tasks]


def running(q: Queue) -> dict[str, tuple[int, int, int]]:
    """group -> (admitted, limit, held)."""
    return {g.name: (g.running, g.limit, g.held) for g in q.groups()}


def test_no_more_than_the_concurrency_of_a_group_is_claimed(alias: RedisTarget) -> None:
    fn = tenant_task(group_concurrency=2)
    for n in range(5):
        fn.delay("a", n)
    fn.delay("b")
    q = grouped()
    first = q.pop(10)
    assert sorted(tenants(first)) == ["a", "a", "b"]
    assert q.pop(10) == []  # a is at its limit, b has nothing left
    assert running(q) == {"a": (2, 2, 3), "b": (1, 2, 0)}
    assert q.stats()["ready"] == 0
    a0 = next(task for task in first if tenants([task]) == ["a"])
    assert q.ack(a0) == 1
    [next_a] = q.pop(10)
    assert tenants([next_a]) == ["a"] and next_a.payload["args"][1] == 2  # FIFO in a group
    assert running(q)["a"] == (2, 2, 2)


def test_a_big_backlog_does_not_starve_small_groups(alias: RedisTarget) -> None:
    fn = tenant_task(group_concurrency=1)
    fn.enqueue_many([(("big", n), {}) for n in range(60)])
    for small in ("s1", "s2", "s3"):
        fn.delay(small)
    q = grouped()
    order: list[str] = []
    for _ in range(70):  # one worker, one task at a time
        tasks = q.pop(1)
        if not tasks:
            break
        order += tenants(tasks)
        q.ack(tasks)
    assert len(order) == 63
    last_small = max(order.index(s) for s in ("s1", "s2", "s3"))
    assert last_small < 8, order[:10]  # round-robin: not behind the 60 of "big"
    assert q.groups() == []  # every slot came back, nothing is held


def test_retry_gives_the_slot_back_and_holds_the_task(alias: RedisTarget) -> None:
    fn = tenant_task(group_concurrency=1)
    fn.delay("a", 1)
    fn.delay("a", 2)
    q = grouped()
    [one] = q.pop(5)
    assert q.retry(one, delay=30, error="boom") == "retried"
    [two] = q.pop(5)  # the slot went to the next task; the retried one waits 30 s
    assert two.payload["args"][1] == 2
    assert running(q) == {"a": (1, 1, 1)}
    assert q.retry(two, delay=0, error="boom") == "retried"  # due now: admitted again
    [again] = q.pop(5)
    assert again.id == two.id and again.attempts == 2
    assert q.retry(again, error="final", max_attempts=2) == "dead"
    assert running(q) == {"a": (0, 1, 1)}
    assert q.get(again.id) is not None and q.get(again.id).state == DEAD  # type: ignore[union-attr]


def test_an_expired_lease_keeps_the_slot_until_the_run_ends(alias: RedisTarget) -> None:
    """A SIGKILLed worker's lease lapses: its task comes back (with its slot) and runs again;
    the group's next task gets the slot when that run ends."""
    fn = tenant_task(group_concurrency=1)
    fn.delay("a", 1)
    fn.delay("a", 2)
    q = grouped()
    [lost] = q.pop(1, lease=0.000001)  # its worker "died": the lease lapses at once
    [back] = q.pop(5, lease=60)
    assert back.id == lost.id and back.suspect  # the same task, not the group's next one
    assert running(q) == {"a": (1, 1, 1)}
    assert q.ack(lost) == 0  # the dead worker's claim is stale: no slot is given twice
    assert running(q) == {"a": (1, 1, 1)}
    assert q.ack(back) == 1
    [nxt] = q.pop(5)
    assert nxt.payload["args"][1] == 2
    assert q.ack(nxt) == 1
    assert q.groups() == []


def test_an_expired_lease_out_of_attempts_frees_the_slot(alias: RedisTarget) -> None:
    fn = tenant_task(group_concurrency=1)
    fn.delay("a", 1)
    fn.delay("a", 2)
    q = grouped()
    [lost] = q.claim(1, lease=0.000001, start=False).tasks
    assert q.start(lost, lease=0.000001, max_attempts=1) is True  # its run started, then died
    claim = q.claim(5, lease=60)  # dead-letters it (1 attempt of 1) and admits the next
    assert claim.recovered == 1
    assert q.get(lost.id).state == DEAD  # type: ignore[union-attr]
    assert [t.payload["args"][1] for t in claim.tasks] == [2]
    assert running(q) == {"a": (1, 1, 0)}


def test_cancel_and_remove_free_slots_and_held_tasks(alias: RedisTarget) -> None:
    fn = tenant_task(group_concurrency=1)
    ids = [str(fn.delay("a", n)) for n in range(4)]
    q = grouped()
    assert running(q) == {"a": (1, 1, 3)}
    assert q.cancel(ids[2]) == "removed"  # held
    assert q.remove(ids[3]) is True  # held
    assert running(q) == {"a": (1, 1, 1)}
    assert q.cancel(ids[0]) == "removed"  # admitted, not claimed: the slot goes to ids[1]
    [task] = q.pop(5)
    assert task.id == ids[1]
    assert q.cancel(task.id) == "requested"  # running: its worker ends it as cancelled
    assert q.retry(task, error="cancelled", final="cancelled") == "dead"
    assert q.groups() == []


def test_purge_deletes_held_tasks(alias: RedisTarget) -> None:
    fn = tenant_task(group_concurrency=1)
    for n in range(5):
        fn.delay("a", n)
    q = grouped()
    assert q.purge() == 5
    assert q.groups() == [] and q.pop(5) == []
    raw = queues["default"].client  # type: ignore[attr-defined]
    assert not raw.exists(q.keys[3], *q.group_keys)  # no payload, no group state is left


def test_a_delayed_task_of_a_group_is_admitted_when_due(alias: RedisTarget) -> None:
    fn = tenant_task(group_concurrency=2)
    fn.enqueue(("a", 1), delay=0.3)
    q = grouped()
    claim = q.claim(5)
    assert claim.tasks == [] and claim.next_due is not None  # the worker knows when to look
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        tasks = q.pop(5)
        if tasks:
            assert tenants(tasks) == ["a"]
            return
        time.sleep(0.05)
    raise AssertionError("the delayed task of the group was never admitted")


def test_the_rate_limit_of_a_group_spaces_its_tasks(alias: RedisTarget) -> None:
    fn = tenant_task(group_concurrency=10, group_rate_limit="5/s")  # 200 ms apart, burst 1
    for n in range(3):
        fn.delay("a", n)
    fn.delay("b")
    q = grouped()
    first = q.pop(10)
    assert sorted(tenants(first)) == ["a", "b"]  # one of a now; b has its own limit
    assert q.pop(10) == []
    deadline, got = time.monotonic() + 20, 1
    while got < 3 and time.monotonic() < deadline:
        got += len(q.pop(10))
        time.sleep(0.02)
    assert got == 3


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"group_key": "tenant"}, "group_key"),
        ({"group_key": lambda t: t, "group_concurrency": 0}, "group_concurrency"),
        ({"group_key": lambda t: t, "group_concurrency": "2"}, "group_concurrency"),
        ({"group_key": lambda t: t, "group_rate_limit": "often"}, "group_rate_limit"),
        ({"group_concurrency": 2}, "group_key"),
        ({"group_key": lambda t: t, "unique_for": 5}, "unique_for"),
    ],
)
def test_bad_group_options_name_the_argument(options: dict[str, Any], named: str) -> None:
    def work(tenant: str) -> None:
        del tenant

    with pytest.raises(InvalidArgument, match=named):
        TaskFunction(work, queue="grouped", **options)


def test_a_key_that_returns_no_string_queues_nothing(alias: RedisTarget) -> None:
    def work(tenant: Any) -> None:
        del tenant

    fn = TaskFunction(work, queue="grouped", group_key=lambda tenant: tenant)
    for bad in (7, "", None, "x" * 201):
        with pytest.raises(InvalidArgument, match="group_key"):
            fn.delay(bad)
    with pytest.raises(InvalidArgument, match="group_key"):
        fn.enqueue_many([(("ok",), {}), ((8,), {})])
    q = grouped()
    assert q.stats()["ready"] == 0 and q.groups() == []
    raw = queues["default"].client  # type: ignore[attr-defined]
    assert not raw.exists(*q.group_keys)


def test_a_grouped_task_cannot_be_a_workflow_step() -> None:
    fn = tenant_task(group_concurrency=2)
    with pytest.raises(InvalidArgument, match="group_key"):
        fn.s("a")


def test_replacing_a_running_task_frees_its_slot_once(alias: RedisTarget) -> None:
    fn = tenant_task(group_concurrency=1)
    fn.enqueue(("a", 1), id="x")
    fn.enqueue(("a", 2), id="y")
    q = grouped()
    [old] = q.pop(5)
    assert old.id == "x"
    assert fn.enqueue(("a", 3), id="x", replace=True).queued
    # the old run's slot went to "y"; the new copy of "x" is held behind it
    assert running(q) == {"a": (1, 1, 1)}
    assert q.ack(old) == 0  # the replaced run's ack is stale: it frees nothing
    assert running(q) == {"a": (1, 1, 1)}
    [y] = q.pop(5)
    assert y.id == "y" and q.ack(y) == 1
    [x] = q.pop(5)
    assert (x.id, x.payload["args"][1]) == ("x", 3)
    assert q.ack(x) == 1 and q.groups() == []


def test_groups_are_listed_whatever_the_backlog(single_target: RedisTarget) -> None:
    """The listing scans per-group fields only: a backlog of 15,000 held tasks (30,000
    per-task fields, more than the listing's bounded scan reads) does not hide its group."""
    params = {**single_target.params(), "KEY_PREFIX": "grp"}
    with override_settings(REDISLOCK_QUEUES={"default": params}):
        fn = tenant_task(group_concurrency=2)
        fn.enqueue_many([(("big", n), {}) for n in range(15000)], batch_size=5000)
        fn.delay("small")
        groups = {g.name: (g.running, g.held) for g in grouped().groups()}
        assert groups == {"big": (2, 14998), "small": (1, 0)}
        assert grouped().purge() == 15001
