"""Periodic tasks: schedules, catch-up, time zones, bad input, and each tick queued once.

Schedules and their ticks are pure functions (no Redis). Everything that queues runs on the
real single server and the real cluster (the enqueue script is Lua); downtime is simulated
with an injected clock, not by sleeping.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from io import StringIO
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from django.core.management import CommandError, call_command
from django.test import override_settings

from django_redislock import locks, periodic_task, queues
from django_redislock.exceptions import (
    ConfigurationError,
    ConnectionFailed,
    InvalidArgument,
    MissingDependency,
)
from django_redislock.periodic import registry as periodic_registry
from django_redislock.periodic.registry import check_periodic_tasks, entry_schedule
from django_redislock.periodic.scheduler import ALREADY, KEPT, QUEUED, Scheduler
from django_redislock.periodic.schedules import (
    MAX_CATCH_UP,
    MAX_CRON_WALK,
    SECOND,
    Schedule,
    schedule,
    tick_label,
    to_micros,
)
from django_redislock.queue import Queue

from .conftest import RedisTarget
from .faults import contains
from .processes import wait_for
from .proxied import ProxiedTarget, no_resend_options, resend_options
from .testapp import tasks

ROOT = Path(__file__).resolve().parent.parent
REMEMBER = "tests.testapp.tasks.remember"
BERLIN = ZoneInfo("Europe/Berlin")
MINUTE = 60 * SECOND


def at(*parts: int, tz: Any = BERLIN, fold: int = 0) -> int:
    """A wall-clock time in ``tz`` as a tick."""
    return to_micros(datetime(*parts, tzinfo=tz, fold=fold))  # type: ignore[misc,arg-type]


def local(tick: int) -> str:
    moment = datetime.fromtimestamp(tick / SECOND, BERLIN)
    return moment.strftime("%m-%d %H:%M%z")


# -- schedules: pure ---------------------------------------------------------------------------


def test_every_ticks_at_multiples_of_the_interval_since_the_epoch() -> None:
    found = schedule("five", REMEMBER, every=timedelta(minutes=5), args=["x"])
    start = at(2026, 1, 1, 10, 2, tz=ZoneInfo("UTC"))
    ticks = list(found.ticks(start, start + 12 * MINUTE))
    assert [tick_label(tick) for tick in ticks] == [
        "2026-01-01T10:05:00Z",
        "2026-01-01T10:10:00Z",
    ]
    assert found.task_id(ticks[0]) == "periodic:five:2026-01-01T10:05:00Z"


def test_cron_reads_the_time_zone_of_the_schedule() -> None:
    found = schedule("daily", REMEMBER, cron="0 3 * * *", timezone="Europe/Berlin")
    tick = found.next_tick(at(2026, 1, 10, 12, 0))
    assert tick_label(tick) == "2026-01-11T02:00:00Z"  # 03:00 CET


@override_settings(TIME_ZONE="America/New_York")
def test_cron_defaults_to_django_time_zone() -> None:
    found = schedule("daily", REMEMBER, cron="0 3 * * *")
    tick = found.next_tick(at(2026, 1, 10, 12, 0, tz=ZoneInfo("UTC")))
    assert tick_label(tick) == "2026-01-11T08:00:00Z"  # 03:00 EST


def test_spring_forward_a_tick_in_the_skipped_hour_fires_after_the_jump() -> None:
    found = schedule("at0230", REMEMBER, cron="30 2 * * *", timezone=BERLIN)
    ticks = list(found.ticks(at(2026, 3, 28, 12, 0), at(2026, 3, 30, 12, 0)))
    # 2026-03-29 has no 02:30 in Berlin: the tick fires at 03:00 CEST, once
    assert [local(tick) for tick in ticks] == ["03-29 03:00+0200", "03-30 02:30+0200"]


def test_autumn_a_fixed_hour_fires_once_in_the_repeated_hour() -> None:
    found = schedule("at0230", REMEMBER, cron="30 2 * * *", timezone=BERLIN)
    ticks = list(found.ticks(at(2026, 10, 24, 12, 0), at(2026, 10, 26, 12, 0)))
    assert [local(tick) for tick in ticks] == ["10-25 02:30+0200", "10-26 02:30+0100"]


def test_autumn_an_every_hour_expression_fires_in_both_passes() -> None:
    found = schedule("halfhourly", REMEMBER, cron="*/30 * * * *", timezone=BERLIN)
    ticks = list(found.ticks(at(2026, 10, 25, 1, 45), at(2026, 10, 25, 3, 0, fold=0)))
    assert [local(tick) for tick in ticks] == [
        "10-25 02:00+0200",
        "10-25 02:30+0200",
        "10-25 02:00+0100",
        "10-25 02:30+0100",
        "10-25 03:00+0100",
    ]
    assert len({found.task_id(tick) for tick in ticks}) == 5  # ids are UTC: no clash


def test_due_after_a_downtime_follows_catch_up() -> None:
    def due(catch_up: str, last: int | None, now: int) -> tuple[list[int], int]:
        found = schedule("s", REMEMBER, every=timedelta(minutes=5), catch_up=catch_up)
        return found.due(last, now)

    last = 100 * 5 * MINUTE
    now = last + 60 * MINUTE + 30 * SECOND  # 12 ticks missed, the latest 30 s ago
    assert due("none", last, now) == ([last + 60 * MINUTE], 11)
    assert due("last", last, now) == ([last + 60 * MINUTE], 11)
    ticks, skipped = due("all", last, now)
    assert ticks == [last + i * 5 * MINUTE for i in range(1, 13)] and skipped == 0
    later = last + 64 * MINUTE  # the latest tick is 4 minutes late: none skips it, last not
    assert due("none", last, later) == ([], 12)
    assert due("last", last, later) == ([last + 60 * MINUTE], 11)
    # never run before: starts a grace period ago, whatever the policy
    assert due("all", None, now) == ([last + 60 * MINUTE], 0)


def test_cron_catch_up_after_a_year_is_bounded_and_takes_the_latest_ticks() -> None:
    def due(catch_up: str) -> tuple[list[int], int]:
        found = schedule("minutely", REMEMBER, cron="* * * * *", catch_up=catch_up, timezone=BERLIN)
        return found.due(at(2025, 1, 1, 0, 0), at(2026, 1, 1, 0, 0, 30))

    assert due("last") == ([at(2026, 1, 1, 0, 0)], MAX_CRON_WALK - 1)
    ticks, skipped = due("all")
    assert len(ticks) == MAX_CATCH_UP and ticks[-1] == at(2026, 1, 1, 0, 0)
    assert ticks[0] == at(2026, 1, 1, 0, 0) - (MAX_CATCH_UP - 1) * MINUTE
    assert skipped == MAX_CRON_WALK - MAX_CATCH_UP  # counted up to the walk's bound
    assert due("none") == ([at(2026, 1, 1, 0, 0)], MAX_CRON_WALK)


def test_catch_up_all_over_the_autumn_night_keeps_one_fixed_hour_tick() -> None:
    found = schedule("at0230", REMEMBER, cron="30 2 * * *", catch_up="all", timezone=BERLIN)
    ticks, skipped = found.due(at(2026, 10, 23, 12, 0), at(2026, 10, 26, 12, 0))
    assert [local(tick) for tick in ticks] == [
        "10-24 02:30+0200",
        "10-25 02:30+0200",
        "10-26 02:30+0100",
    ]
    assert skipped == 0


# -- bad input ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"cron": "61 * * * *"}, r"cron '61 \* \* \* \*' is not a valid cron expression"),
        ({"cron": "every day"}, r"cron must be a cron expression of five fields"),
        ({"every": timedelta(0)}, r"every must be a positive interval"),
        ({"every": timedelta(seconds=-5)}, r"every must be a positive interval"),
        ({"every": "5m"}, r"every must be a timedelta, got str"),
        ({}, r"give exactly one of cron= and every="),
        ({"cron": "* * * * *", "every": timedelta(1)}, r"give exactly one of cron= and every="),
        ({"every": timedelta(1), "catch_up": "some"}, r"catch_up must be one of none, last, all"),
        ({"every": timedelta(1), "grace": 0}, r"grace must be a positive number"),
        ({"every": timedelta(1), "timezone": "Mars/Olympus"}, r"timezone 'Mars/Olympus'"),
    ],
)
def test_bad_decorator_arguments_are_named(options: dict[str, Any], message: str) -> None:
    before = dict(periodic_registry.schedules)
    with pytest.raises(InvalidArgument, match=message):

        @periodic_task(**options)
        def job() -> None: ...

    assert periodic_registry.schedules == before


def test_arguments_the_task_cannot_take_fail_at_decoration() -> None:
    with pytest.raises(TypeError, match="nothing was queued"):

        @periodic_task(every=timedelta(minutes=1), args=[1, 2])
        def job(one: int) -> None: ...


def test_a_decorated_function_is_a_task_with_a_schedule() -> None:
    @periodic_task(every=timedelta(minutes=1), args=[1], queue="tests", name="deco-test")
    def job(one: int) -> int:
        return one

    try:
        assert job(5) == 5 and job.queue_name == "tests"
        found = periodic_registry.schedules["deco-test"]
        assert found.task == job.path and found.args == (1,) and found.every == MINUTE
    finally:
        periodic_registry.schedules.pop("deco-test")


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"task": REMEMBER, "cron": "*/5 * * *"}, "cron must be a cron expression"),
        ({"task": REMEMBER, "every": 0}, "every must be a positive interval"),
        ({"task": REMEMBER}, "give exactly one of cron= and every="),
        ({"task": REMEMBER, "every": 5, "catch_up": "x"}, "catch_up must be one of"),
        ({"task": REMEMBER, "every": 5, "when": 1}, "unknown key\\(s\\) 'when'"),
        ({"cron": "* * * * *"}, "'task' must be the dotted path of a @task"),
        ({"task": REMEMBER, "every": 5, "args": "x"}, "args must be a list"),
        ("nope", "must be a dict"),
    ],
)
def test_bad_settings_entries_name_the_entry(entry: Any, message: str) -> None:
    with pytest.raises(ConfigurationError, match=f"REDISLOCK_PERIODIC_TASKS\\['bad'\\]: {message}"):
        entry_schedule("bad", entry)


def test_the_system_check_reports_each_bad_entry() -> None:
    value = {
        "ok": {"task": REMEMBER, "every": 5, "args": ["x"]},
        "bad": {"task": REMEMBER, "cron": "nope"},
    }
    with override_settings(REDISLOCK_PERIODIC_TASKS=value):
        messages = check_periodic_tasks()
    assert [(m.id, m.msg) for m in messages] == [
        (
            "redislock.E021",
            "REDISLOCK_PERIODIC_TASKS['bad']: cron must be a cron expression of five fields "
            "(minute hour day month weekday), got 'nope'",
        )
    ]
    with override_settings(REDISLOCK_PERIODIC_TASKS=["x"]):
        assert [m.id for m in check_periodic_tasks()] == ["redislock.E021"]


def test_a_missing_croniter_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "croniter", None)
    with pytest.raises(MissingDependency, match=r"django-redislock\[periodic\]"):
        schedule("c", REMEMBER, cron="* * * * *")
    schedule("e", REMEMBER, every=timedelta(seconds=1))  # every= needs no croniter
    entry = {"task": REMEMBER, "cron": "* * * * *"}
    with override_settings(REDISLOCK_PERIODIC_TASKS={"c": entry}):
        assert "django-redislock[periodic]" in check_periodic_tasks()[0].msg


# -- queueing on real servers -----------------------------------------------------------------


class Clock:
    """An injectable clock (microseconds) that tests move by hand."""

    def __init__(self, now: int) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


@pytest.fixture(params=["single", "cluster"])
def real(request: pytest.FixtureRequest) -> Iterator[RedisTarget]:
    target: RedisTarget = request.getfixturevalue(f"{request.param}_target")
    params = {**target.params(), "KEY_PREFIX": "test"}
    with override_settings(
        REDISLOCK_QUEUES={"default": params}, REDISLOCK_LOCKS={"default": params}
    ):
        yield target


def periodic_ids(queue: Queue) -> list[str]:
    return sorted(task.id for task in queue.tasks(count=5000) if task.id.startswith("periodic:"))


def make(catch_up: str = "none", minutes: int = 5, name: str = "five") -> Schedule:
    return schedule(
        name, REMEMBER, every=timedelta(minutes=minutes), args=[name], catch_up=catch_up
    )


BASE = 20_000_000 * MINUTE  # a multiple of 5 minutes


@pytest.mark.parametrize(
    ("catch_up", "expected"),
    [("none", 1), ("last", 2), ("all", 13)],
)
def test_catch_up_after_a_downtime(real: RedisTarget, catch_up: str, expected: int) -> None:
    clock = Clock(BASE + SECOND)
    scheduler = Scheduler([make(catch_up)], clock=clock)
    scheduler.tick()  # the tick at BASE, one second late: on time
    clock.now = BASE + 60 * MINUTE + 2 * MINUTE  # down for an hour; latest tick 2 min late
    scheduler.tick()
    queue = queues["default"].queue("tests")
    ids = periodic_ids(queue)
    assert len(ids) == expected
    assert ids[0] == f"periodic:five:{tick_label(BASE)}"
    if catch_up != "none":
        assert ids[-1] == f"periodic:five:{tick_label(BASE + 60 * MINUTE)}"
    assert scheduler.stats.skipped == {"none": 12, "last": 11, "all": 0}[catch_up]


def test_a_tick_that_ran_and_was_acked_is_never_queued_again(real: RedisTarget) -> None:
    clock = Clock(BASE + SECOND)
    scheduler = Scheduler([make()], clock=clock)
    entry = scheduler.entries[0]
    assert scheduler.send(entry, BASE, clock.now) == QUEUED
    queue = entry.queue
    (claimed,) = queue.pop()
    assert claimed.id == f"periodic:five:{tick_label(BASE)}"
    assert claimed.payload == {"task": REMEMBER, "args": ["five"], "kwargs": {}}
    queue.ack(claimed)
    # a resend of the same tick (a redis-py retry, a second scheduler, a restart)
    assert scheduler.send(entry, BASE, clock.now) == ALREADY
    scheduler.tick()
    assert queue.stats()["ready"] == 0 and periodic_ids(queue) == []
    # the plain queue dedup alone would have queued it again: this is why the mark exists
    assert queue.enqueue(claimed.id, claimed.payload) is True


def test_a_tick_queued_by_hand_is_kept_and_marked(real: RedisTarget) -> None:
    clock = Clock(BASE + SECOND)
    scheduler = Scheduler([make()], clock=clock)
    entry = scheduler.entries[0]
    entry.queue.enqueue(entry.schedule.task_id(BASE), {"by": "hand"})
    assert scheduler.send(entry, BASE, clock.now) == KEPT
    assert entry.queue.get(entry.schedule.task_id(BASE)).payload == {"by": "hand"}  # type: ignore[union-attr]
    assert scheduler.send(entry, BASE, clock.now) == ALREADY


def test_a_scheduler_that_dies_before_enqueueing_leaves_the_tick_to_the_next(
    real: RedisTarget,
) -> None:
    clock = Clock(BASE + SECOND)
    dying = Scheduler([make()], clock=clock)
    ticks, _ = dying.entries[0].schedule.due(None, clock.now)
    assert ticks == [BASE]  # computed, then the process dies: nothing was sent
    clock.now = BASE + 11 * SECOND  # a standby takes over after the leader lock's ttl
    other = Scheduler([make()], clock=clock)
    other.tick()
    other.tick()
    assert periodic_ids(queues["default"].queue("tests")) == [f"periodic:five:{tick_label(BASE)}"]
    assert other.stats.queued == 1 and other.stats.already == 0


def test_many_schedulers_at_once_queue_each_tick_once(real: RedisTarget) -> None:
    clock = Clock(BASE + SECOND)
    schedulers = [Scheduler([make("all", 1, "m")], clock=clock) for _ in range(3)]
    for step in range(5):
        clock.now = BASE + step * MINUTE + SECOND
        for scheduler in schedulers:
            scheduler.tick()
    assert len(periodic_ids(queues["default"].queue("tests"))) == 5
    assert sum(s.stats.queued for s in schedulers) == 5
    assert sum(s.stats.already for s in schedulers) == 0  # the others found nothing due


def test_the_queue_override_of_a_settings_entry(real: RedisTarget) -> None:
    entry = {"task": REMEMBER, "every": 300, "args": ["o"], "queue": "other"}
    with override_settings(REDISLOCK_PERIODIC_TASKS={"o": entry}):
        scheduler = Scheduler(clock=Clock(BASE + SECOND))
    scheduler.entries = [e for e in scheduler.entries if e.schedule.name == "o"]
    scheduler.tick()
    assert periodic_ids(queues["default"].queue("other")) == [f"periodic:o:{tick_label(BASE)}"]
    assert "other" in queues["default"].queue_names()


def test_the_leader_loop_queues_ticks_and_releases_its_lock(real: RedisTarget) -> None:
    scheduler = Scheduler([make("none", 1, "loop")], leader_ttl=3.0)
    thread = scheduler.start_thread()
    # stop once it has led a round, not after a fixed time: a first cluster connection on a
    # loaded machine can take longer than any short timeout (this failed once in CI with 0.5 s)
    deadline = time.monotonic() + 10.0
    while scheduler.stats.rounds < 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    scheduler.stop()
    thread.join(timeout=10.0)
    assert not thread.is_alive()
    assert scheduler.stats.rounds >= 1
    assert not scheduler.lock.locked()  # released for a standby
    standby = Scheduler([make("none", 1, "loop")])
    assert standby.lock.acquire(timeout=0)
    standby.lock.release()


@pytest.mark.django_db(transaction=True)  # the worker closes stale database connections
def test_drain_queue_with_a_scheduler_runs_the_ticks(real: RedisTarget) -> None:
    entry = {"task": REMEMBER, "every": 1, "args": ["drained"]}
    tasks.CALLS.clear()
    with override_settings(REDISLOCK_PERIODIC_TASKS={"drained": entry}):
        call_command("drain_queue", "tests", "--scheduler", "--timeout", "2.5", verbosity=0)
    assert 2 <= tasks.CALLS.count("drained") <= 4


# -- real run_scheduler processes --------------------------------------------------------------


def spawn_scheduler(
    target: RedisTarget, schedules: dict[str, Any], log: Path
) -> subprocess.Popen[str]:
    location = target.location if isinstance(target.location, str) else target.location[0]
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.periodic_settings",
        "REDISLOCK_TEST_URL": location,
        "REDISLOCK_TEST_OPTIONS": json.dumps(target.options),
        "REDISLOCK_TEST_PERIODIC": json.dumps(schedules),
        "PYTHONPATH": str(ROOT),
        "PYTHONUNBUFFERED": "1",
    }
    with log.open("w") as err:
        return subprocess.Popen(
            [sys.executable, "-m", "django", "run_scheduler", "-v", "2", "--timeout", "60"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=err,
            text=True,
        )


def leader_of(processes: list[subprocess.Popen[str]], logs: list[Path]) -> int | None:
    """The index of the process that logged that it leads last and still runs."""
    for index, (process, log) in enumerate(zip(processes, logs, strict=True)):
        if process.poll() is None and "leading" in log.read_text():
            return index
    return None


def queued_ticks(logs: list[Path]) -> list[str]:
    return [
        line.rsplit(" ", 1)[1]
        for log in logs
        for line in log.read_text().splitlines()
        if "queued the tick of" in line
    ]


@pytest.mark.slow
def test_three_scheduler_processes_queue_each_tick_once(real: RedisTarget, tmp_path: Path) -> None:
    """One-second ticks, 3 real run_scheduler processes, the leader SIGKILLed mid-way.

    Event-driven: the leader queues 3 ticks, is killed, and a standby takes over (within
    the lock's ttl, 10 s) and queues 3 ticks of its own; the ticks of the gap are caught up.
    """
    schedules = {"sec": {"task": REMEMBER, "every": 1, "args": ["sec"], "grace": 30}}
    logs = [tmp_path / f"scheduler{i}.log" for i in range(3)]
    processes = [spawn_scheduler(real, schedules, log) for log in logs]
    try:
        deadline = time.monotonic() + 30
        while leader_of(processes, logs) is None and time.monotonic() < deadline:
            time.sleep(0.1)
        first = leader_of(processes, logs)
        assert first is not None, [log.read_text() for log in logs]
        wait_for(lambda: len(queued_ticks([logs[first]])) >= 3, 30, "the leader's 3 ticks")
        processes[first].kill()  # between two ticks or mid-round: either way, each tick once
        processes[first].wait(10)
        before = set(queued_ticks([logs[first]]))
        others = [log for i, log in enumerate(logs) if i != first]
        wait_for(lambda: len(queued_ticks(others)) >= 3, 60, "a standby's 3 ticks")
    finally:
        for process in processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in processes:
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
    labels = queued_ticks(logs)
    assert len(labels) == len(set(labels)), "a tick was queued twice"
    ticks = sorted(datetime.fromisoformat(label.replace("Z", "+00:00")) for label in labels)
    span = int((ticks[-1] - ticks[0]).total_seconds()) + 1
    assert len(ticks) == span, f"ticks missing: {len(ticks)} of {span}"
    assert len(before) >= 3 and len(set(labels) - before) >= 3, "no takeover"
    ids = periodic_ids(queues["default"].queue("tests"))
    assert ids == sorted(f"periodic:sec:{label}" for label in labels)


@pytest.mark.parametrize("fault", ["resend", "no_resend"])
@pytest.mark.parametrize("kind", ["single", "cluster"])
def test_a_lost_reply_mid_enqueue_still_queues_the_tick_once(
    kind: str, fault: str, request: pytest.FixtureRequest
) -> None:
    """The enqueue reached Redis, its reply was lost: resent or retried next round, one task."""
    target: ProxiedTarget = request.getfixturevalue(f"proxied_{kind}")
    options = resend_options(kind) if fault == "resend" else no_resend_options(kind)
    params = target.params(**options)
    with override_settings(REDISLOCK_QUEUES={"default": params}):
        clock = Clock(BASE + SECOND)
        scheduler = Scheduler([make()], clock=clock)
        scheduler.tick()  # warm up: the script is loaded, the queue registered
        clock.now = BASE + 5 * MINUTE + SECOND
        faults = target.drop_reply(contains(":periodic"), then="cut")
        try:
            scheduler.tick()
        except ConnectionFailed:
            assert fault == "no_resend", "a resent enqueue must not fail"
        finally:
            target.clear()
        assert any(f.fired.is_set() for f in faults), "the fault never met the enqueue"
        scheduler.tick()  # the next round (or another scheduler) finds the tick marked
        ids = periodic_ids(queues["default"].queue("tests"))
    assert ids == [f"periodic:five:{tick_label(BASE + i * 5 * MINUTE)}" for i in range(2)]


# -- the commands ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("schedules", "message"),
    [
        ({"bad": {"task": REMEMBER, "cron": "* * *"}}, r"REDISLOCK_PERIODIC_TASKS\['bad'\]: cron"),
        (
            {"gone": {"task": "tests.testapp.tasks.nope", "every": 1}},
            r"periodic task 'gone': no @task is registered",
        ),
        (
            {"args": {"task": REMEMBER, "every": 1, "args": []}},
            r"periodic task 'args': .*missing a required argument: 'tag'$",
        ),
    ],
)
def test_run_scheduler_refuses_bad_schedules(schedules: dict[str, Any], message: str) -> None:
    with (
        override_settings(REDISLOCK_PERIODIC_TASKS=schedules),
        pytest.raises(CommandError, match=message),
    ):
        call_command("run_scheduler", "--timeout", "1")


def test_run_scheduler_refuses_a_non_positive_timeout() -> None:
    with pytest.raises(CommandError, match="--timeout must be > 0"):
        call_command("run_scheduler", "--timeout", "0")


def test_run_scheduler_runs_and_reports(real: RedisTarget) -> None:
    schedules = {"cmd": {"task": REMEMBER, "every": 1, "args": ["cmd"]}}
    out = StringIO()
    with override_settings(REDISLOCK_PERIODIC_TASKS=schedules):
        call_command("run_scheduler", "--timeout", "1.5", stdout=out, verbosity=0)
    assert "Scheduling cmd (default)" in out.getvalue()
    queued = len(periodic_ids(queues["default"].queue("tests")))
    assert f"queued {queued} tick(s)" in out.getvalue() and 1 <= queued <= 3
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # the handler was put back


def test_a_leader_that_lost_its_lock_stands_by_and_a_standby_leads(real: RedisTarget) -> None:
    first = Scheduler([make("none", 1, "lead")], leader_ttl=1.5)
    thread = first.start_thread()
    try:
        deadline = time.monotonic() + 10
        while not first.lock.owned() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert first.lock.owned()
        # built before the release: the first finds out at its next renewal (within ttl / 3)
        # and then waits for the lock itself, so the second must be asking at once
        second = Scheduler([make("none", 1, "lead")], leader_ttl=1.5)
        assert locks["default"].force_release(first.lock.name)  # as if its ttl ran out
        assert second.lock.acquire(timeout=5)
        time.sleep(1.0)  # the first renews at most every ttl / 3: it must find out and wait
        assert not first.lock.owned() and second.lock.owned()
        second.lock.release()
        deadline = time.monotonic() + 5  # ...and lead again once the lock is free
        while not first.lock.owned() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert first.lock.owned()
    finally:
        first.stop()
        thread.join(10)
    assert not thread.is_alive() and not first.lock.locked()


def test_an_unreachable_lock_server_is_logged_once_per_outage(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # the standby tries the leader lock every second: an outage of minutes must not log a
    # warning a second (a worker logs one per outage too)
    down = {"LOCATION": "redis://127.0.0.1:1/0", "OPTIONS": {"SOCKET_CONNECT_TIMEOUT": 0.2}}
    caplog.set_level("WARNING", logger="django_redislock")
    with override_settings(REDISLOCK_LOCKS={"default": down, "down": down}):
        scheduler = Scheduler([make("none", 1, "down")], lock_using="down")
        thread = scheduler.start_thread()
        try:

            def tried_thrice() -> bool:  # each try logs its grant as unknown
                return sum("unknown grant" in r.getMessage() for r in caplog.records) >= 3

            wait_for(tried_thrice, 60, "three tries of the leader lock")
        finally:
            scheduler.stop()
            thread.join(10)
    assert not thread.is_alive()
    reached = [r.getMessage() for r in caplog.records if "cannot reach" in r.getMessage()]
    assert len(reached) == 1, reached
    assert "retrying every second" in reached[0]


def test_a_queued_tick_counts_as_enqueued_in_the_rates(real: RedisTarget) -> None:
    from django_redislock.queue.rates import read

    clock = Clock(BASE + SECOND)
    scheduler = Scheduler([make()], clock=clock)
    entry = scheduler.entries[0]
    assert scheduler.send(entry, BASE, clock.now) == QUEUED
    assert scheduler.send(entry, BASE, clock.now) == ALREADY  # a resend counts nothing
    assert read(entry.queue).total("enqueued") == 1


def test_a_queued_tick_has_its_enqueue_time(real: RedisTarget) -> None:
    scheduler = Scheduler([make()], clock=Clock(BASE + SECOND))
    scheduler.tick()
    queue = queues["default"].queue("tests")
    (tick_id,) = periodic_ids(queue)
    assert queue.backend.client.hexists(queue.enqueued_key, tick_id)
