"""RedisTaskBackend against Django's task backend contract (django.tasks or the backport).

Skipped where neither Django 6's ``django.tasks`` nor the ``django-tasks`` package is
installed.
"""

from __future__ import annotations

import asyncio
import io
import sys
import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.test import override_settings
from django.utils import timezone

from django_redislock import queues
from django_redislock.queue import READY, Queue

from .conftest import RedisTarget

compat = pytest.importorskip("django_redislock.contrib.tasks.compat", exc_type=ImportError)
djtasks = pytest.importorskip("tests.djtasks")

from django_redislock.contrib.tasks import RedisTaskBackend  # noqa: E402
from django_redislock.contrib.tasks.results import result_keys  # noqa: E402


def redis_queues() -> Any:
    """The default queue alias (a Redis queue backend in these settings)."""
    return queues["default"]


TaskResultStatus = compat.TaskResultStatus
pytestmark = pytest.mark.django_db(transaction=True)


def tasks_setting(**options: Any) -> dict[str, Any]:
    return {
        "default": {
            "BACKEND": "django_redislock.contrib.tasks.RedisTaskBackend",
            "QUEUES": ["default", "django-tasks"],
            "OPTIONS": options,
        }
    }


@pytest.fixture
def target(redis_target: RedisTarget) -> Iterator[RedisTarget]:
    options = {"RETRY_BACKOFF": 0.01, "RETRY_JITTER": False}
    params = {**redis_target.params(**options), "KEY_PREFIX": "test"}
    with override_settings(REDISLOCK_QUEUES={"default": params}, TASKS=tasks_setting()):
        yield redis_target


@pytest.fixture
def single(single_target: RedisTarget) -> Iterator[RedisTarget]:
    options = {"RETRY_BACKOFF": 0.01, "RETRY_JITTER": False}
    params = {**single_target.params(**options), "KEY_PREFIX": "test"}
    with override_settings(REDISLOCK_QUEUES={"default": params}, TASKS=tasks_setting()):
        yield single_target


def drain(*queue_names: str) -> str:
    out = io.StringIO()
    call_command("drain_queue", *(queue_names or ["django-tasks"]), "--burst", stdout=out)
    return out.getvalue()


def queue(name: str = "django-tasks") -> Queue:
    found: Queue = queues["default"].queue(name)
    return found


def test_capabilities_are_declared() -> None:
    backend = compat.task_backends["default"]
    assert isinstance(backend, RedisTaskBackend)
    assert backend.supports_defer and backend.supports_async_task and backend.supports_get_result
    assert backend.supports_priority is True  # mapped onto the queue's levels


def test_enqueue_run_and_read_the_result(target: RedisTarget) -> None:
    result = djtasks.add.enqueue(2, 3)
    assert result.status == TaskResultStatus.READY and result.args == [2, 3]
    assert result.enqueued_at is not None and result.backend == "default"
    stored = djtasks.add.get_result(result.id)
    assert stored.status == TaskResultStatus.READY and stored.task.func is djtasks.add.func
    assert [task.id for task in queue().top(10)] == [result.id]
    assert "processed 1, failed 0" in drain()
    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL and result.return_value == 5
    assert result.is_finished and result.attempts == 1 and len(result.worker_ids) == 1
    assert result.started_at <= result.finished_at and result.errors == []
    assert result.last_attempted_at == result.started_at
    assert queue().stats()["ready"] == 0 and queue().stats()["dead"] == 0


def test_run_after_defers_the_call(single: RedisTarget) -> None:
    later = djtasks.add.using(run_after=timezone.now() + timedelta(hours=1)).enqueue(1, 1)
    past = djtasks.add.using(run_after=timezone.now() - timedelta(seconds=5)).enqueue(2, 2)
    stats = queue().stats()
    assert (stats["ready"], stats["delayed"]) == (1, 1)
    drain()
    assert djtasks.add.get_result(past.id).return_value == 4
    waiting = djtasks.add.get_result(later.id)
    assert waiting.status == TaskResultStatus.READY and waiting.task.run_after is not None
    delayed = queue().get(later.id)
    assert delayed is not None and 3590 < (delayed.when - timezone.now()).total_seconds() <= 3600
    # a result outlives the delay: its time to live is the delay plus RESULT_TTL
    assert single.raw.pttl(result_keys(redis_queues(), later.id)[0]) > 3600 * 1000


def test_django_priorities_order_the_queue(target: RedisTarget) -> None:
    low = djtasks.add.using(priority=-50).enqueue(1, 1)
    default = djtasks.add.enqueue(2, 2)
    high = djtasks.add.using(priority=100).enqueue(3, 3)
    mid = djtasks.add.using(priority=40).enqueue(4, 4)
    levels = {task.id: task.priority for task in queue().tasks(READY)}
    assert levels == {low.id: 0, default.id: 0, high.id: 9, mid.id: 4}
    assert "processed 4, failed 0" in drain("django-tasks", "--batch", "1")
    assert djtasks.runs() == ["add:3+3", "add:4+4", "add:1+1", "add:2+2"]


def test_out_of_range_priorities_are_refused_by_django() -> None:
    with pytest.raises(compat.InvalidTask, match="priority"):
        djtasks.add.using(priority=101)


def test_async_enqueue_keeps_the_priority(target: RedisTarget) -> None:
    result = asyncio.run(djtasks.add.using(priority=100).aenqueue(5, 5))
    found = queue().get(result.id)
    assert found is not None and found.priority == 9


def test_errors_are_recorded_and_the_call_is_dead_lettered(single: RedisTarget) -> None:
    result = djtasks.explode.enqueue("boom")
    output = drain()
    assert "failed 1" in output and "dead 1" in output
    result.refresh()
    assert result.status == TaskResultStatus.FAILED and result.finished_at is not None
    [error] = result.errors
    assert error.exception_class is ValueError
    assert "ValueError: boom" in error.traceback and "explode" in error.traceback
    with pytest.raises(ValueError, match="Task failed"):
        result.return_value  # noqa: B018
    dead = queue().tasks("dead")
    assert [task.id for task in dead] == [result.id]


def test_retries_keep_every_error_and_worker(single: RedisTarget) -> None:
    # a 1 s backoff: the first burst drain must return before the retry is due (with the
    # fixture's 10 ms it could run both attempts on a slow machine)
    options = {"RETRY_BACKOFF": 1.0, "RETRY_JITTER": False}
    params = {**single.params(**options), "KEY_PREFIX": "test"}
    with override_settings(
        REDISLOCK_QUEUES={"default": params}, TASKS=tasks_setting(MAX_ATTEMPTS=2)
    ):
        result = djtasks.explode.enqueue("again")
        drain()
        first = djtasks.explode.get_result(result.id)
        assert first.status == TaskResultStatus.READY and len(first.errors) == 1
        deadline = time.monotonic() + 10
        while True:  # drain until the retry has run (due in 1 s); bounded
            drain()
            final = djtasks.explode.get_result(result.id)
            if final.status == TaskResultStatus.FAILED or time.monotonic() > deadline:
                break
            time.sleep(0.05)
    assert final.status == TaskResultStatus.FAILED
    assert len(final.errors) == 2 and final.attempts == 2
    assert djtasks.runs().count("explode:again") == 2


def test_unserializable_return_value_fails_the_call(single: RedisTarget) -> None:
    result = djtasks.returns_object.enqueue()
    drain()
    result.refresh()
    assert result.status == TaskResultStatus.FAILED
    assert result.errors[0].exception_class is TypeError


def test_arguments_must_be_json(single: RedisTarget) -> None:
    with pytest.raises(TypeError):
        djtasks.add.enqueue(object(), 1)
    assert queue().stats()["ready"] == 0


def test_async_task_and_async_api(target: RedisTarget) -> None:
    async def scenario() -> Any:
        result = await djtasks.slow_echo.aenqueue("hi")
        stored = await djtasks.slow_echo.aget_result(result.id)
        assert stored.status == TaskResultStatus.READY
        return result

    result = asyncio.run(scenario())
    drain()
    result.refresh()
    assert result.return_value == {"echo": "hi", "items": [1, 2]}
    assert asyncio.run(djtasks.slow_echo.aget_result(result.id)).status == "SUCCESSFUL"


def test_context_gets_the_attempt_and_result(single: RedisTarget) -> None:
    result = djtasks.with_context.enqueue("c")
    drain()
    assert djtasks.with_context.get_result(result.id).return_value == {
        "attempt": 1,
        "id": result.id,
    }


def test_unknown_result_and_mismatched_task(single: RedisTarget) -> None:
    with pytest.raises(compat.TaskResultDoesNotExist):
        compat.task_backends["default"].get_result("nope")
    result = djtasks.add.enqueue(1, 2)
    with pytest.raises(Exception, match="Task does not match"):
        djtasks.explode.get_result(result.id)


def test_results_expire_after_result_ttl(single: RedisTarget) -> None:
    with override_settings(TASKS=tasks_setting(RESULT_TTL=30)):
        result = djtasks.add.enqueue(1, 2)
        drain()
        keys = result_keys(redis_queues(), result.id)
        assert 0 < single.raw.pttl(keys[0]) <= 30_000
        assert 0 < single.raw.pttl(keys[1]) <= 30_000
        single.raw.delete(*keys)
        with pytest.raises(compat.TaskResultDoesNotExist):
            djtasks.add.get_result(result.id)


def test_signals_of_the_framework(single: RedisTarget) -> None:
    seen: list[tuple[str, str]] = []

    def receiver(name: str) -> Any:
        def handler(sender: Any, task_result: Any, **kwargs: Any) -> None:
            seen.append((name, str(task_result.status)))

        return handler

    handlers = {
        "enqueued": receiver("enqueued"),
        "started": receiver("started"),
        "finished": receiver("finished"),
    }
    for name, handler in handlers.items():
        getattr(compat, f"task_{name}").connect(handler)
    try:
        djtasks.add.enqueue(1, 1)
        drain()
    finally:
        for name, handler in handlers.items():
            getattr(compat, f"task_{name}").disconnect(handler)
    assert seen == [("enqueued", "READY"), ("started", "RUNNING"), ("finished", "SUCCESSFUL")]


def test_a_deleted_task_is_failed_and_dead_lettered(single: RedisTarget) -> None:
    result = djtasks.add.enqueue(1, 1)
    q = queue()
    [claimed] = q.pop()
    q.release([claimed])
    payload = {**claimed.payload, "django_task": "tests.djtasks.gone"}
    q.enqueue(result.id, payload, replace=True)
    assert "dead 1" in drain()
    raw = single.raw.hgetall(result_keys(redis_queues(), result.id)[0])
    assert raw[b"status"] == b"FAILED"


def test_a_django_task_path_is_never_imported(single: RedisTarget) -> None:
    result = djtasks.add.enqueue(1, 1)
    q = queue()
    [claimed] = q.pop()
    q.release([claimed])
    sys.modules.pop("this", None)
    payload = {**claimed.payload, "django_task": "this.anything"}
    q.enqueue(result.id, payload, replace=True)
    assert "dead 1" in drain()
    assert "this" not in sys.modules
    dead = q.get(result.id)
    assert dead is not None and "not among the task modules" in dead.last_error


def test_both_kinds_of_task_share_a_queue(single: RedisTarget) -> None:
    from .testapp import tasks as app_tasks

    djtasks.on_default_queue.enqueue()
    app_tasks.remember.enqueue(("mixed",))
    out = io.StringIO()
    call_command("drain_queue", "default", "tests", "--burst", stdout=out)
    assert "processed 2, failed 0" in out.getvalue()


def test_bad_options_name_the_alias() -> None:
    # Django builds the backends while running the system checks: building one never raises
    # (the redislock.E008 check reports the error), its first use does.
    with pytest.raises(
        ImproperlyConfigured,
        match=r"TASKS\['x'\]: unknown OPTIONS key\(s\) 'TTL'; valid keys are LEASE",
    ):
        RedisTaskBackend("x", {"OPTIONS": {"TTL": 1}}).queue_backend  # noqa: B018
    with pytest.raises(ImproperlyConfigured, match="RESULT_TTL"):
        RedisTaskBackend("x", {"OPTIONS": {"RESULT_TTL": 0}}).queue_backend  # noqa: B018
    with pytest.raises(ImproperlyConfigured, match="MAX_ATTEMPTS"):
        RedisTaskBackend("x", {"OPTIONS": {"MAX_ATTEMPTS": 0}}).get_result("nope")


def test_missing_framework_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without django.tasks and django-tasks the package imports, the backend says what to do."""
    for name in list(sys.modules):
        if name.startswith(("django.tasks", "django_tasks", "django_redislock.contrib.tasks")):
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "django.tasks", None)
    monkeypatch.setitem(sys.modules, "django_tasks", None)
    import django_redislock.contrib.tasks as package
    from django_redislock.exceptions import MissingDependency

    with pytest.raises(MissingDependency, match=r"django-redislock\[tasks\]"):
        package.RedisTaskBackend  # noqa: B018
