"""A task's control over its own runs (issue 29, item 5): ``raise Retry(...)``,
``retry_on``/``dont_retry_on``/``retry_jitter``, ``expires``/``eta``, ``delay_on`` and
``delay_async``; on a real server and a real cluster (``real``)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from datetime import timezone as dt_timezone

import pytest
from django.test import override_settings

import django_redislock
from django_redislock import queues, task
from django_redislock.exceptions import InvalidArgument, TaskFailed
from django_redislock.queue import Queue, history
from django_redislock.queue.results import ResultStatus
from django_redislock.queue.stats import counters_key
from django_redislock.queue.worker import Worker

from . import control_tasks as ct
from .conftest import RedisTarget
from .testapp import tasks

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def alias(real: RedisTarget) -> Iterator[RedisTarget]:
    options = {"RETRY_BACKOFF": 0.01, "RETRY_JITTER": False, "SOCKET_TIMEOUT": 3.0}
    params = {**real.params(**options), "KEY_PREFIX": "tctl"}
    with override_settings(REDISLOCK_QUEUES={"default": params}):
        for name in ("control", "urgent"):
            queues["default"].queue(name).purge()
        queues["default"].client.delete(tasks.RUNS_KEY)  # type: ignore[attr-defined]
        yield real


def control() -> Queue:
    found: Queue = queues["default"].queue("control")
    return found


def drain(*names: str, pool: str = "solo") -> None:
    """Run the queues' tasks until none is ready or delayed (burst workers in this thread;
    a retry's short backoff ends a burst, so bounded rounds)."""
    chosen = [queues["default"].queue(n) for n in names or ("control",)]
    for _ in range(100):
        Worker(chosen, burst=True, timeout=30, pool=pool).run()
        # one reading per queue: read twice, a retried task could leave "delayed" for
        # "ready" between the two and count in neither (the drain then ended early)
        readings = [q.stats() for q in chosen]
        if not any(stats["ready"] + stats["delayed"] for stats in readings):
            return
        time.sleep(0.02)
    raise AssertionError("the queues were not drained in 100 rounds")


def runs_of(tag: str) -> list[str]:
    return [entry for entry in tasks.runs() if entry.split(":")[1] == tag]


@pytest.mark.parametrize("pool", ["solo", "thread", "async"])
def test_retry_raised_inside_a_task_runs_it_again(alias: RedisTarget, pool: str) -> None:
    call = ct.retries_itself.delay("again", 3)
    drain(pool=pool)
    assert runs_of("again") == ["run:again:1", "run:again:2", "run:again:3"]
    assert control().get(call) is None  # succeeded on its third run, acked
    outcomes = [run.outcome for run in history.read(control(), call)]
    assert outcomes == ["retried", "retried", "succeeded"]


def test_retry_max_retries_dead_letters_after_them_with_its_cause(alias: RedisTarget) -> None:
    call = ct.retries_twice_at_most.delay("twice")
    drain()
    assert runs_of("twice") == ["run:twice:1", "run:twice:2", "run:twice:3"]  # not 10
    dead = control().get(call)
    assert dead is not None and dead.state == "dead"
    assert dead.last_error.startswith("OSError: the disk is busy")


def test_retry_countdown_sets_the_next_due_time(alias: RedisTarget) -> None:
    @task(queue="control", name="tests.test_task_control.later")
    def later() -> None:
        raise django_redislock.Retry(countdown=3600)

    call = later.delay()
    Worker([control()], burst=True, timeout=30).run()
    waiting = control().get(call)
    assert waiting is not None and waiting.state == "delayed"
    assert waiting.score > time.time() * 1e6 + 3000e6  # about an hour away, not the backoff


def test_retry_on_retries_only_those_errors(alias: RedisTarget) -> None:
    others = ct.only_os_errors.delay("value", "value")
    listed = ct.only_os_errors.delay("os", "os")
    drain()
    assert len(runs_of("value")) == 1  # a ValueError is not in retry_on: dead at once
    assert len(runs_of("os")) == 5  # an OSError is retried up to max_attempts
    assert {t.id for t in control().tasks("dead")} == {others, listed}


def test_dont_retry_on_dead_letters_those_errors_at_once(alias: RedisTarget) -> None:
    ct.never_key_errors.delay("key", "key")
    ct.never_key_errors.delay("value", "value")
    drain()
    assert len(runs_of("key")) == 1
    assert len(runs_of("value")) == 5


def test_retry_jitter_of_a_task_overrides_the_alias(alias: RedisTarget) -> None:
    assert control().backoff(3, 1.0, 100.0, jitter=False) == 4.0
    jittered = {control().backoff(3, 1.0, 100.0, jitter=True) for _ in range(20)}
    assert all(2.0 <= delay <= 4.0 for delay in jittered) and len(jittered) > 1

    @task(queue="control", name="tests.test_task_control.steady", retry_jitter=False)
    def steady() -> None: ...

    assert steady.retry_jitter is False


@pytest.mark.parametrize(
    ("option", "value"),
    [("retry_on", "OSError"), ("dont_retry_on", (OSError, 3)), ("retry_jitter", "yes")],
)
def test_bad_retry_options_name_the_argument(option: str, value: object) -> None:
    with pytest.raises(InvalidArgument, match=option):
        options: dict[str, object] = {option: value}
        task(queue="control", name="tests.test_task_control.bad", **options)(  # type: ignore[call-overload]
            lambda: None
        )


def test_retry_checks_its_arguments() -> None:
    with pytest.raises(InvalidArgument, match="countdown"):
        django_redislock.Retry(countdown=-1)
    with pytest.raises(InvalidArgument, match="max_retries"):
        django_redislock.Retry(max_retries=-1)


@pytest.mark.parametrize("pool", ["solo", "thread", "async"])
def test_an_expired_call_never_runs_and_shows_why(alias: RedisTarget, pool: str) -> None:
    stale = ct.sleeps.enqueue(args=["stale"], expires=0.05)
    ct.noted.enqueue(args=["fresh"], expires=3600)
    deadline = time.monotonic() + 10
    while time.time() < stale_expiry(stale) and time.monotonic() < deadline:
        time.sleep(0.05)
    drain(pool=pool)
    assert runs_of("stale") == []  # never started
    assert runs_of("fresh") == ["run:fresh:control"]
    dead = control().get(stale)
    assert dead is not None and dead.state == "dead"
    assert dead.last_error.startswith("TaskExpired: task ")
    assert [run.outcome for run in history.read(control(), stale)] == ["expired"]
    assert stale.status is ResultStatus.FAILED
    with pytest.raises(TaskFailed, match="TaskExpired"):
        stale.result(timeout=5)
    counters = queues["default"].client.hgetall(counters_key(control()))  # type: ignore[attr-defined]
    assert counters[b"expired"] == b"1" and b"failed" not in counters


def stale_expiry(call: str) -> float:
    found = control().get(call)
    assert found is not None
    return float(found.payload["expires"])


def test_eta_is_when_the_call_is_due(alias: RedisTarget) -> None:
    at = datetime.now(dt_timezone.utc) + timedelta(hours=1)
    call = ct.noted.enqueue(args=["eta"], eta=at)
    found = control().get(call)
    assert found is not None and found.state == "delayed"
    assert abs(found.score / 1e6 - at.timestamp()) < 5


def test_bad_eta_and_expires_are_refused_and_queue_nothing(alias: RedisTarget) -> None:
    soon = datetime.now(dt_timezone.utc) + timedelta(minutes=1)
    with pytest.raises(InvalidArgument, match="eta"):
        ct.noted.enqueue(args=["x"], delay=5, eta=soon)
    with pytest.raises(InvalidArgument, match="eta"):
        ct.noted.enqueue(args=["x"], eta="tomorrow")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match="expires"):
        ct.noted.enqueue(args=["x"], eta=soon, expires=10)
    with pytest.raises(InvalidArgument, match="expires"):
        ct.noted.enqueue(args=["x"], expires=-1)
    assert control().stats()["ready"] == 0 and control().stats()["delayed"] == 0


def test_delay_on_sends_one_call_to_another_queue(alias: RedisTarget) -> None:
    call = ct.noted.delay_on("urgent", "moved")
    assert call.queued is True
    assert control().get(call) is None
    assert queues["default"].queue("urgent").get(call) is not None
    assert call.status is ResultStatus.READY  # the handle follows the queue it went to
    drain("urgent")
    assert runs_of("moved") == ["run:moved:urgent"]
    with pytest.raises(InvalidArgument, match="name"):
        ct.noted.delay_on("{braces}", "x")
    queues["default"].queue("urgent").purge()


def test_enqueue_takes_a_queue_too(alias: RedisTarget) -> None:
    call = ct.noted.enqueue(args=["moved"], queue="urgent")
    assert queues["default"].queue("urgent").get(call) is not None
    queues["default"].queue("urgent").purge()


def test_delay_async_queues_over_the_asyncio_client(alias: RedisTarget) -> None:
    async def send() -> list[str]:
        calls = [await ct.noted.delay_async(f"a{i}") for i in range(3)]
        stored = await ct.sleeps.delay_async("kept")  # stores its result: the MULTI path
        return [*calls, stored]

    calls = asyncio.run(send())
    assert all(getattr(call, "queued", None) is True for call in calls)
    assert sorted(t.id for t in control().tasks("ready")) == sorted(calls)
    with pytest.raises(TypeError, match="nothing was queued"):
        asyncio.run(ct.noted.delay_async())  # type: ignore[call-arg]


def test_the_names_are_exported_lazily() -> None:
    assert {"Retry", "TaskCancelled", "current_task"} <= set(django_redislock.__all__)
    assert django_redislock.current_task.id is None  # outside a run
    assert django_redislock.current_task.cancelled() is False
