"""The @task registry: ids, dedup, transactions, eager mode, payload checks, resolution."""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import transaction
from django.test import override_settings

from django_redislock import queues, task
from django_redislock.exceptions import (
    InvalidArgument,
    TaskImportError,
    TaskNotRegistered,
)
from django_redislock.queue import Queue
from django_redislock.queue.registry import registry, resolve

from .conftest import RedisTarget
from .testapp import tasks


@pytest.fixture
def alias(redis_target: RedisTarget) -> Iterator[RedisTarget]:
    yield from use(redis_target)


def use(target: RedisTarget, **options: Any) -> Iterator[RedisTarget]:
    params = {**target.params(MAX_PAYLOAD_BYTES=2000, **options), "KEY_PREFIX": "test"}
    tasks.CALLS.clear()
    with override_settings(REDISLOCK_QUEUES={"default": params}):
        yield target


@pytest.fixture
def single(single_target: RedisTarget) -> Iterator[RedisTarget]:
    yield from use(single_target)


def the_queue() -> Queue:
    found: Queue = queues["default"].queue("tests")
    return found


def test_registered_by_dotted_path_and_still_callable(alias: RedisTarget) -> None:
    assert registry["tests.testapp.tasks.remember"] is tasks.remember
    assert tasks.remember("direct") == "direct"
    assert tasks.remember.__name__ == "remember" and tasks.remember.__doc__ is None
    assert resolve("tests.testapp.tasks.remember") is tasks.remember


def test_delay_queues_a_json_envelope(alias: RedisTarget) -> None:
    when = datetime.datetime(2026, 11, 22, 1, 2, 3, tzinfo=datetime.timezone.utc)
    task_id = tasks.remember.delay("x", at=when)
    [queued] = the_queue().top()
    assert queued.id == task_id and len(task_id) == 32
    assert queued.payload == {
        "task": "tests.testapp.tasks.remember",
        "args": ["x"],
        "kwargs": {"at": "2026-11-22T01:02:03Z"},
    }
    assert tasks.CALLS == []


def test_explicit_id_dedups_and_replace_reschedules(alias: RedisTarget) -> None:
    q = the_queue()
    assert tasks.remember.enqueue(args=["a"], id="order-1") == "order-1"
    tasks.remember.enqueue(args=["b"], id="order-1")
    [only] = q.top(5)
    assert only.payload["args"] == ["a"]
    tasks.remember.enqueue(args=["c"], id="order-1", delay=30, replace=True)
    assert q.top(5) == [] and q.stats()["delayed"] == 1


def test_unique_ids_come_from_the_arguments(alias: RedisTarget) -> None:
    first = tasks.unique_job.delay(1, b=2)
    assert tasks.unique_job.enqueue(kwargs={"b": 2}, args=[1]) == first
    assert tasks.unique_job.delay(1, b=3) != first
    assert first.startswith("tests.testapp.tasks.unique_job:")
    assert the_queue().stats()["ready"] == 2


def test_bad_calls_raise_before_anything_is_sent(alias: RedisTarget) -> None:
    q = the_queue()
    with pytest.raises(InvalidArgument, match="payload is not JSON"):
        tasks.remember.delay(object())  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match="MAX_PAYLOAD_BYTES"):
        tasks.remember.delay("x" * 3000)
    with pytest.raises(InvalidArgument, match="args"):
        tasks.remember.enqueue(args="abc")
    with pytest.raises(InvalidArgument, match="kwargs"):
        tasks.remember.enqueue(kwargs=["a"])  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match="delay"):
        tasks.remember.enqueue(args=["a"], delay=-1)
    with pytest.raises(InvalidArgument, match="id"):
        tasks.remember.enqueue(args=["a"], id="")
    with pytest.raises(InvalidArgument, match="max_attempts"):
        task(max_attempts=0)(lambda: None)
    with pytest.raises(InvalidArgument, match="name"):
        task(queue="")(lambda: None)
    assert q.stats()["ready"] == 0
    assert alias.raw.exists(*q.keys) == 0


def test_resolve_tells_deleted_from_broken() -> None:
    with pytest.raises(TaskNotRegistered, match="deleted or renamed"):
        resolve("tests.testapp.tasks.no_such_function")
    with pytest.raises(TaskNotRegistered):
        resolve("tests.testapp.no_such_module.fn")
    with pytest.raises(TaskNotRegistered):
        resolve("nonexistent_package_xyz.fn")
    with pytest.raises(TaskNotRegistered, match=r"os\.getcwd"):
        resolve("os.getcwd")  # importable but not a @task: never run
    with pytest.raises(TaskImportError, match="broken on purpose"):
        resolve("tests.broken_task_module.fn")


def test_eager_mode_runs_inline(redis_target: RedisTarget) -> None:
    for _ in use(redis_target, EAGER=True):
        task_id = tasks.remember.delay("now")
        assert tasks.CALLS == ["now"]
        tasks.remember_async.delay("co")
        assert tasks.CALLS == ["now", "async:co"]
        with pytest.raises(ValueError, match="always fails"):
            tasks.always_fails.delay("e")
        with pytest.raises(InvalidArgument):
            tasks.remember.delay(object())  # type: ignore[arg-type]
        assert len(task_id) == 32 and the_queue().stats()["ready"] == 0


@pytest.mark.django_db(transaction=True)
def test_enqueue_in_a_transaction_waits_for_the_commit(single: RedisTarget) -> None:
    q = the_queue()
    with transaction.atomic():
        tasks.remember.delay("committed")
        assert q.stats()["ready"] == 0
    assert [t.payload["args"] for t in q.top(5)] == [["committed"]]
    with pytest.raises(RuntimeError), transaction.atomic():
        tasks.remember.delay("rolled back")
        raise RuntimeError
    assert q.stats()["ready"] == 1


@pytest.mark.django_db(transaction=True)
def test_immediate_commit_mode(single_target: RedisTarget) -> None:
    for _ in use(single_target, COMMIT_MODE="immediate"):
        with pytest.raises(RuntimeError), transaction.atomic():
            tasks.remember.delay("sent anyway")
            assert the_queue().stats()["ready"] == 1
            raise RuntimeError
        assert the_queue().stats()["ready"] == 1


@pytest.mark.django_db
def test_on_commit_callbacks_in_a_test_case(
    single: RedisTarget, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        tasks.remember.delay("captured")
        assert the_queue().stats()["ready"] == 0
    assert len(callbacks) == 1 and the_queue().stats()["ready"] == 1


def test_enqueue_many_is_validated_first_then_batched(alias: RedisTarget) -> None:
    q = the_queue()
    with pytest.raises(InvalidArgument):
        tasks.remember.enqueue_many([(("a",), {}), ((object(),), {})])
    assert q.stats()["ready"] == 0
    ids = tasks.remember.enqueue_many(((("t" + str(i),), {}) for i in range(25)), batch_size=10)
    assert len(set(ids)) == 25
    assert [t.id for t in q.top(25)] == ids


def test_pickle_serializer_warns(redis_target: RedisTarget) -> None:
    assert redis_target.queue_backend().check() == []
    [warning] = redis_target.queue_backend(SERIALIZER="pickle").check()
    assert warning.id == "redislock.W002" and "pickle" in warning.msg
