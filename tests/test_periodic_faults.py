"""Schedules that cannot fire, one schedule's error, a clock that goes back, and DST wildcards.

A cron expression no date matches is refused where it is written (``@periodic_task``, the
settings, ``manage.py check``, ``run_scheduler``); a schedule that fails anyway (one written
before that check, or a queue that refuses its tick) costs only its own round, and the
scheduler thread of ``drain_queue --scheduler`` goes on; a Redis clock behind a schedule's
mark queues nothing and says so.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.test import override_settings

from django_redislock import periodic_task, queues
from django_redislock.exceptions import ConfigurationError, InvalidArgument
from django_redislock.periodic import registry as periodic_registry
from django_redislock.periodic.registry import check_periodic_tasks, entry_schedule
from django_redislock.periodic.scheduler import Scheduler
from django_redislock.periodic.schedules import SECOND, Schedule, schedule, tick_label

from .conftest import RedisTarget
from .test_periodic import BASE, BERLIN, MINUTE, REMEMBER, Clock, at, local, make, periodic_ids

NEVER = "0 0 31 2 *"


@pytest.fixture(params=["single", "cluster"])
def real(request: pytest.FixtureRequest) -> Iterator[RedisTarget]:
    """The queue and lock aliases on a real server, then a real cluster."""
    target: RedisTarget = request.getfixturevalue(f"{request.param}_target")
    params = {**target.params(), "KEY_PREFIX": "test"}
    with override_settings(
        REDISLOCK_QUEUES={"default": params}, REDISLOCK_LOCKS={"default": params}
    ):
        yield target


def test_a_cron_that_never_fires_is_refused_where_it_is_written() -> None:
    before = dict(periodic_registry.schedules)
    with pytest.raises(InvalidArgument, match=r"cron '0 0 31 2 \*' never fires"):

        @periodic_task(cron=NEVER)
        def job() -> None: ...

    assert periodic_registry.schedules == before
    with pytest.raises(ConfigurationError, match=r"REDISLOCK_PERIODIC_TASKS\['feb'\]: .*never"):
        entry_schedule("feb", {"task": REMEMBER, "cron": NEVER, "args": ["x"]})
    entries = {"feb": {"task": REMEMBER, "cron": "0 0 30 2 *", "args": ["x"]}}
    with override_settings(REDISLOCK_PERIODIC_TASKS=entries):
        assert [m.id for m in check_periodic_tasks()] == ["redislock.E021"]
        assert "never fires" in check_periodic_tasks()[0].msg
        with pytest.raises(CommandError, match="never fires"):
            call_command("run_scheduler", "--timeout", "1")
    # a leap day fires (every four years): not refused
    schedule("leap", REMEMBER, cron="0 0 29 2 *", args=["x"])


def broken() -> Schedule:
    """A schedule that fails every round (built without validation, as an older one was)."""
    return Schedule(name="broken", task=REMEMBER, cron=NEVER, args=("broken",))


def test_one_failing_schedule_does_not_stop_the_others(
    real: RedisTarget,
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock(BASE + SECOND)
    scheduler = Scheduler([broken(), make()], clock=clock)
    with caplog.at_level(logging.ERROR, "django_redislock"):
        next_tick = scheduler.tick()
    assert periodic_ids(queues["default"].queue("tests")) == [f"periodic:five:{tick_label(BASE)}"]
    assert scheduler.stats.failed == 1
    assert any(
        "periodic broken: this round failed" in r.getMessage() and r.exc_info
        for r in caplog.records
    )
    assert BASE < next_tick <= BASE + 5 * MINUTE


def test_the_scheduler_thread_lives_on_beside_a_failing_schedule(
    real: RedisTarget,
) -> None:
    good = schedule("second", REMEMBER, every=timedelta(seconds=1), args=["second"])
    scheduler = Scheduler([broken(), good], leader_ttl=3.0)
    thread = scheduler.start_thread()
    try:
        queue = queues["default"].queue("tests")
        deadline = time.monotonic() + 20
        while len(periodic_ids(queue)) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert thread.is_alive()
        assert len(periodic_ids(queue)) >= 2  # the healthy schedule ticked on, round after round
        assert scheduler.stats.failed >= 2
    finally:
        scheduler.stop()
        thread.join(10)
    assert not thread.is_alive()


def test_a_redis_clock_behind_the_mark_queues_nothing_and_warns(
    real: RedisTarget,
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock(BASE + SECOND)
    scheduler = Scheduler([make()], clock=clock)
    scheduler.tick()
    queue = queues["default"].queue("tests")
    assert len(periodic_ids(queue)) == 1
    clock.now = BASE - 20 * MINUTE  # a failover to a server whose clock is 20 minutes late
    with caplog.at_level(logging.WARNING, "django_redislock"):
        scheduler.tick()
        scheduler.tick()
    behind = [r for r in caplog.records if "behind the last queued tick" in r.getMessage()]
    assert len(behind) == 1  # once, not every round
    assert len(periodic_ids(queue)) == 1  # nothing queued, nothing queued twice
    clock.now = BASE + 5 * MINUTE + SECOND  # the clock passed the mark again
    scheduler.tick()
    assert periodic_ids(queue)[-1] == f"periodic:five:{tick_label(BASE + 5 * MINUTE)}"


def test_autumn_an_hour_field_starting_with_a_star_fires_in_both_passes() -> None:
    for cron in ("0 */1 * * *", "0 * * * *"):
        found = schedule("hourly", REMEMBER, cron=cron, timezone=BERLIN)
        ticks = list(found.ticks(at(2026, 10, 25, 1, 30), at(2026, 10, 25, 3, 30, fold=0)))
        assert [local(tick) for tick in ticks] == [
            "10-25 02:00+0200",
            "10-25 02:00+0100",
            "10-25 03:00+0100",
        ], cron
    fixed = schedule("two", REMEMBER, cron="0 2 * * *", timezone=BERLIN)
    ticks = list(fixed.ticks(at(2026, 10, 25, 1, 30), at(2026, 10, 25, 3, 30, fold=0)))
    assert [local(tick) for tick in ticks] == ["10-25 02:00+0200"]
    assert MINUTE == 60 * SECOND
