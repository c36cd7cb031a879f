"""The @task registry: ids, dedup, transactions, eager mode, payload checks, resolution."""

from __future__ import annotations

import datetime
import re
import sys
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
    UndecodablePayload,
)
from django_redislock.queue import Queue
from django_redislock.queue import registry as registry_module
from django_redislock.queue.registry import registry, resolve

from .conftest import RedisTarget, make_queue
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


def nested(depth: int) -> list[Any]:
    """A list ``depth`` levels deep."""
    top: list[Any] = []
    inner = top
    for _ in range(depth - 1):
        inner.append([])
        inner = inner[0]
    return top


def test_enqueue_refuses_what_a_worker_could_not_decode(alias: RedisTarget) -> None:
    q = the_queue()
    with pytest.raises(InvalidArgument, match=r"payload\['args'\]\[0\]\[0\].* more than 100"):
        tasks.remember.delay(nested(150))  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match=r"payload\['kwargs'\]\['deep'\]"):
        tasks.remember.delay("x", deep={"a": nested(120)})
    with pytest.raises(InvalidArgument, match="nested more than 100 levels"):
        q.enqueue("deep", nested(101))
    with pytest.raises(InvalidArgument, match="nested more than 100 levels"):
        tasks.remember.enqueue_many([((nested(150),), {})])
    assert alias.raw.exists(*q.keys) == 0
    # brackets inside strings are not nesting; 100 levels are fine
    assert q.enqueue("brackets", {"text": "[{" * 500})
    assert q.enqueue("deepest", nested(100))
    assert q.get("deepest").payload == nested(100)  # type: ignore[union-attr]


def test_a_pickle_too_deep_to_write_is_refused(redis_target: RedisTarget) -> None:
    q = make_queue(redis_target, "pickled", SERIALIZER="pickle")
    with pytest.raises(InvalidArgument, match="payload cannot be pickled: it is nested too deep"):
        q.enqueue("deep", nested(5_000))
    assert redis_target.raw.exists(*q.keys) == 0


def test_an_undecodable_payload_fails_only_where_it_is_read(alias: RedisTarget) -> None:
    q = the_queue()
    q.enqueue("good", {"n": 1})
    q.enqueue("bad", {"n": 2})
    alias.raw.hset(q.keys[3], "bad", b"\x80\x04not json")
    listed = {t.id: t for t in q.tasks("ready")}  # no error while listing
    assert listed["good"].payload == {"n": 1}
    with pytest.raises(UndecodablePayload, match="payload of task 'bad' cannot be decoded"):
        listed["bad"].payload  # noqa: B018
    assert listed["bad"].payload_text == repr(b"\x80\x04not json")
    assert "not json" in repr(listed["bad"])
    claimed = {t.id: t for t in q.pop(5)}  # nor while claiming
    assert sorted(claimed) == ["bad", "good"]


def test_resolve_tells_deleted_from_broken() -> None:
    with pytest.raises(TaskNotRegistered, match="deleted or renamed"):
        resolve("tests.testapp.tasks.no_such_function")
    with pytest.raises(TaskNotRegistered):
        resolve("tests.testapp.no_such_module.fn")
    with pytest.raises(TaskNotRegistered):
        resolve("nonexistent_package_xyz.fn")
    with pytest.raises(TaskNotRegistered, match=r"os\.getcwd"):
        resolve("os.getcwd")  # importable but not a @task: never run
    with pytest.raises(TaskNotRegistered, match="REDISLOCK_TASK_MODULES"):
        resolve("tests.broken_task_module.fn")  # not a task module: never imported
    with override_settings(REDISLOCK_TASK_MODULES=["tests.broken_task_module"]):
        with pytest.raises(TaskImportError, match="broken on purpose"):
            resolve("tests.broken_task_module.fn")
        # a path in no task module might be a custom name in the broken one: retried too
        with pytest.raises(TaskImportError, match="broken on purpose"):
            resolve("elsewhere.fn")
        assert "tests.broken_task_module" in registry_module.broken_modules


def test_a_payload_path_is_never_imported() -> None:
    for name in ("this", "antigravity", "tests.never_imported_module"):
        sys.modules.pop(name, None)
        with pytest.raises(TaskNotRegistered):
            resolve(f"{name}.anything")
        assert name not in sys.modules


def test_task_modules_come_from_apps_and_the_setting() -> None:
    assert registry_module.task_modules() == [
        "django_redislock.tasks",
        "tests.testapp.tasks",
        "shop.tasks",
    ]
    with override_settings(REDISLOCK_TASK_MODULES=["tests.inventory_tasks", "shop.tasks"]):
        assert registry_module.task_modules()[-1] == "tests.inventory_tasks"
        assert registry_module.check_task_modules() == []
    for value, match in [
        ("tests.inventory_tasks", "must be a list"),
        (["tests.inventory_tasks", "not a module!"], r"REDISLOCK_TASK_MODULES\[1\]"),
        (["tests.no_such_module_at_all"], "no module named 'tests.no_such_module_at_all'"),
    ]:
        with override_settings(REDISLOCK_TASK_MODULES=value):
            [error] = registry_module.check_task_modules()
            assert error.id == "redislock.E020" and re.search(match, error.msg), error.msg


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


def test_delay_binds_the_arguments_at_the_call_site(alias: RedisTarget) -> None:
    q = the_queue()
    bad_calls: list[tuple[Any, str]] = [
        (tasks.unique_job.delay, "missing a required argument: 'a'"),
        (lambda: tasks.unique_job.delay(1, c=2), "unexpected keyword argument 'c'"),  # type: ignore[call-arg]
        (lambda: tasks.unique_job.delay(1, 2, 3), "too many positional arguments"),  # type: ignore[call-arg]
        (lambda: tasks.always_fails.enqueue(kwargs={"tags": "x"}), "missing a required"),
        (lambda: tasks.unique_job.enqueue_many([((1,), {}), ((), {"b": 1})]), "'a'"),
    ]
    for call, message in bad_calls:
        with pytest.raises(TypeError, match=message) as raised:
            call()
        assert "tests.testapp.tasks." in str(raised.value)
        assert "nothing was queued" in str(raised.value)
    assert alias.raw.exists(*q.keys) == 0
    assert tasks.unique_job.delay(1, b=2)  # keyword, default and extra (**extra) calls bind
    assert tasks.remember.delay("x", anything=1)


def test_argument_checks_of_every_parameter_kind() -> None:
    def fn(a: int, /, b: int, c: int = 0, *rest: int, d: int, e: int = 0, **extra: int) -> None:
        """A function with every kind of parameter."""

    checked = task(name="tests.every_kind", queue="tests")(fn)
    try:
        for args, kwargs in [
            ((1, 2), {"d": 4}),
            ((1,), {"b": 2, "d": 4, "z": 9}),
            ((1, 2, 3, 4, 5), {"d": 1}),
        ]:
            checked.check_call(args, kwargs)
        for args, kwargs in [((1, 2), {}), ((), {"a": 1, "b": 2, "d": 4}), ((1,), {"d": 4})]:
            with pytest.raises(TypeError, match=r"tests\.every_kind"):
                checked.check_call(args, kwargs)
    finally:
        del registry["tests.every_kind"]


def test_enqueue_tells_queued_from_deduplicated(alias: RedisTarget) -> None:
    first = tasks.remember.enqueue(args=["a"], id="order-9")
    assert (first, first.queued) == ("order-9", True)
    again = tasks.remember.enqueue(args=["b"], id="order-9")
    assert (again, again.queued) == ("order-9", False)  # deduplicated: the first copy stays
    assert tasks.remember.enqueue(args=["c"], id="order-9", replace=True).queued is True
    assert tasks.remember.delay("d").queued is True
    assert tasks.unique_job.delay(5).queued is True
    assert tasks.unique_job.delay(5).queued is False
    many = tasks.unique_job.enqueue_many([((5,), {}), ((6,), {})])
    assert [m.queued for m in many] == [False, True]
    assert the_queue().enqueue("order-9", {"x": 1}) is False  # the queue API: a bool


@pytest.mark.django_db(transaction=True)
def test_queued_is_known_after_the_commit(single: RedisTarget) -> None:
    with transaction.atomic():
        waiting = tasks.remember.enqueue(args=["a"], id="later")
        twice = tasks.remember.enqueue(args=["a"], id="later")
        assert (waiting.queued, twice.queued) == (None, None)
    assert (waiting.queued, twice.queued) == (True, False)
    with pytest.raises(RuntimeError), transaction.atomic():
        dropped = tasks.remember.enqueue(args=["b"], id="never")
        raise RuntimeError
    assert dropped.queued is None and repr(dropped) == "Enqueued('never', queued=None)"


def test_pickle_serializer_warns(redis_target: RedisTarget) -> None:
    assert redis_target.queue_backend().check() == []
    [warning] = redis_target.queue_backend(SERIALIZER="pickle").check()
    assert warning.id == "redislock.W002" and "pickle" in warning.msg
