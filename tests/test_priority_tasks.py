"""``@task(priority=...)``: the default level of a task's calls and the per-call override."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.test import override_settings

from django_redislock import queues, task
from django_redislock.exceptions import InvalidArgument
from django_redislock.queue import Queue

from .conftest import RedisTarget
from .testapp import tasks


@pytest.fixture
def alias(redis_target: RedisTarget) -> Iterator[RedisTarget]:
    params = {**redis_target.params(), "KEY_PREFIX": "test"}
    with override_settings(REDISLOCK_QUEUES={"default": params}):
        yield redis_target


def the_queue() -> Queue:
    found: Queue = queues["default"].queue("tests")
    return found


def test_delay_uses_the_tasks_level_and_enqueue_overrides_it(alias: RedisTarget) -> None:
    plain = tasks.remember.delay("plain")
    urgent = tasks.urgent.delay("urgent")
    calmer = tasks.urgent.enqueue(args=["calmer"], priority=2)
    boosted = tasks.remember.enqueue(args=["boosted"], priority=9)
    levels = {t.id: t.priority for t in the_queue().tasks("ready")}
    assert levels == {plain: 0, urgent: 7, calmer: 2, boosted: 9}
    assert [t.id for t in the_queue().pop(10)] == [boosted, urgent, calmer, plain]


def test_enqueue_many_takes_a_level(alias: RedisTarget) -> None:
    low = tasks.remember.enqueue_many([(["a"], {}), (["b"], {})])
    high = tasks.remember.enqueue_many([(["c"], {})], priority=5)
    default = tasks.urgent.enqueue_many([(["d"], {})])
    claimed = [t.id for t in the_queue().pop(10)]
    assert claimed == [*default, *high, *low]


def test_replace_moves_a_call_to_the_new_level(alias: RedisTarget) -> None:
    tasks.remember.enqueue(args=["first"], id="x")
    tasks.remember.enqueue(args=["other"], id="y")
    assert tasks.remember.enqueue(args=["again"], id="y", replace=True, priority=3).queued
    assert [t.id for t in the_queue().pop(10)] == ["y", "x"]


@pytest.mark.parametrize("bad", [-1, 10, 1.5, "3", True])
def test_bad_priorities_are_refused(alias: RedisTarget, bad: object) -> None:
    with pytest.raises(InvalidArgument, match="priority"):
        task(priority=bad)(lambda: None)  # type: ignore[call-overload]
    with pytest.raises(InvalidArgument, match="priority"):
        tasks.remember.enqueue(args=["x"], priority=bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match="priority"):
        tasks.remember.enqueue_many([(["x"], {})], priority=bad)  # type: ignore[arg-type]
    assert the_queue().stats()["ready"] == 0
