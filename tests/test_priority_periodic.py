"""Periodic ticks are queued at their task's priority level."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest
from django.test import override_settings

from django_redislock.periodic.scheduler import ALREADY, QUEUED, Scheduler
from django_redislock.periodic.schedules import schedule

from .conftest import RedisTarget
from .test_periodic import BASE, SECOND, Clock
from .testapp import tasks


@pytest.fixture(params=["single", "cluster"])
def real(request: pytest.FixtureRequest) -> Iterator[RedisTarget]:
    target: RedisTarget = request.getfixturevalue(f"{request.param}_target")
    params = {**target.params(), "KEY_PREFIX": "test"}
    with override_settings(
        REDISLOCK_QUEUES={"default": params}, REDISLOCK_LOCKS={"default": params}
    ):
        yield target


def test_a_tick_of_a_prioritized_task_is_claimed_first(real: RedisTarget) -> None:
    urgent = schedule("urgent", tasks.urgent.path, every=timedelta(minutes=5), args=["tick"])
    plain = schedule("plain", tasks.remember.path, every=timedelta(minutes=5), args=["tick"])
    scheduler = Scheduler([plain, urgent], clock=Clock(BASE + SECOND))
    plain_entry, urgent_entry = scheduler.entries
    assert scheduler.send(plain_entry, BASE, BASE + SECOND) == QUEUED
    assert scheduler.send(urgent_entry, BASE, BASE + SECOND) == QUEUED
    assert scheduler.send(urgent_entry, BASE, BASE + SECOND) == ALREADY  # still once
    queue = urgent_entry.queue
    tick = queue.get(urgent.task_id(BASE))
    assert tick is not None and tick.priority == 7
    claimed = queue.pop(10)
    assert [(t.id, t.priority) for t in claimed] == [
        (urgent.task_id(BASE), 7),
        (plain.task_id(BASE), 0),
    ]
