"""The workers registry in-process: heartbeats, listing, expiry, leaving, hostile records.

Runs on fakeredis, the real single server and the real cluster (``redis_target``).
The drain_queue processes (SIGKILL, SIGTERM) are in tests/test_workers_process.py.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from django.test import override_settings

from django_redislock import queues
from django_redislock.exceptions import ConfigurationError
from django_redislock.queue import Queue
from django_redislock.queue.heartbeat import Registration
from django_redislock.queue.worker import Worker
from django_redislock.queue.workers import (
    beat,
    leave,
    list_workers,
    list_workers_async,
    registry_keys,
)

from .conftest import RedisTarget
from .processes import wait_for
from .testapp import tasks

FAST = {"WORKER_HEARTBEAT": 0.1, "WORKER_HEARTBEAT_TTL": 0.6}


@pytest.fixture
def alias(redis_target: RedisTarget) -> Iterator[Any]:
    """The default queue alias on the target, with a fast heartbeat."""
    params = {**redis_target.params(**FAST), "KEY_PREFIX": "reg"}
    with override_settings(REDISLOCK_QUEUES={"default": params}):
        yield queues["default"]


def record(**extra: Any) -> dict[str, Any]:
    base = {
        "alias": "default",
        "host": "web-1",
        "pid": 4242,
        "queues": ["orders"],
        "pool": "thread",
        "concurrency": 8,
        "up": 12.5,
        "processed": 7,
        "failed": 2,
        "tasks": [{"id": "order-1", "queue": "orders", "age": 1.5}],
    }
    return {**base, **extra}


def test_a_heartbeat_is_listed_with_every_field(alias: Any) -> None:
    stamp = beat(alias, "w1", 30, record())
    listing = list_workers(alias)
    assert listing.total == 1 and listing.unreadable == []
    (worker,) = listing.workers
    assert (worker.id, worker.host, worker.pid, worker.queues) == ("w1", "web-1", 4242, ["orders"])
    assert (worker.pool, worker.concurrency, worker.processed, worker.failed) == ("thread", 8, 7, 2)
    assert worker.heartbeat == stamp
    assert worker.started == stamp - 12_500_000
    (task,) = worker.tasks
    assert (task.id, task.queue, task.started) == ("order-1", "orders", stamp - 1_500_000)
    shown = worker.as_dict(listing.now)
    assert shown["tasks"][0]["running_for"] >= 1.5 and shown["heartbeat_age"] >= 0
    assert shown["started"].endswith("+00:00")


def test_a_worker_that_stops_beating_vanishes_after_its_ttl_and_is_pruned(alias: Any) -> None:
    beat(alias, "dies", 0.3, record(host="a"))
    beat(alias, "lives", 60, record(host="b"))
    assert [w.id for w in list_workers(alias).workers] == ["dies", "lives"]
    wait_for(lambda: list_workers(alias).total == 1, 5, "the silent worker to expire")
    assert [w.id for w in list_workers(alias).workers] == ["lives"]
    beat(alias, "lives", 60, record(host="b"))  # the next heartbeat prunes the dead record
    index, records = registry_keys(alias)
    assert alias.client.zrange(index, 0, -1) == [b"lives"]
    assert alias.client.hkeys(records) == [b"lives"]


def test_the_async_twin_lists_the_same(alias: Any) -> None:
    import asyncio

    beat(alias, "w1", 60, record())
    listing = asyncio.run(list_workers_async(alias))
    assert [(w.id, w.host, w.processed) for w in listing.workers] == [("w1", "web-1", 7)]
    assert listing.total == 1


def test_leaving_removes_at_once_and_a_resend_changes_nothing(alias: Any) -> None:
    beat(alias, "w1", 60, record())
    assert leave(alias, "w1") is True
    assert leave(alias, "w1") is False
    assert list_workers(alias).total == 0
    assert alias.client.exists(*registry_keys(alias)) == 0


def test_the_keys_expire_with_the_last_worker(alias: Any) -> None:
    beat(alias, "w1", 0.5, record())
    index, records = registry_keys(alias)
    assert 0 < alias.client.pttl(index) <= 1600 and 0 < alias.client.pttl(records) <= 1600
    assert "{workers}" in index and "{workers}" in records  # one slot on a cluster


@pytest.mark.parametrize(
    "junk",
    [
        b"not a record",
        b"123:not json",
        b"123:[1, 2]",
        b'123:{"pid": "x"}',
        b'123:{"tasks": [{"id": "a"}]}',
        b'123:{"up": 1e400}',
        b'123:{"queues": "orders"}',
    ],
)
def test_a_record_written_by_someone_else_is_listed_as_unreadable(alias: Any, junk: bytes) -> None:
    index, records = registry_keys(alias)
    beat(alias, "good", 60, record())
    alias.client.zadd(index, {"junk": time.time() * 1e6 + 60e6})
    alias.client.hset(records, "junk", junk)
    listing = list_workers(alias)
    assert [w.id for w in listing.workers] == ["good"]
    assert listing.unreadable == ["junk"] and listing.total == 2


def test_a_running_worker_shows_its_current_task_then_leaves(alias: Any) -> None:
    queue: Queue = alias.queue("slow")
    tasks.slow.enqueue(args=["long", 1.0], id="long")
    worker = Worker([queue], burst=True)
    thread = threading.Thread(target=worker.run)
    thread.start()
    try:

        def running() -> list[Any]:
            listing = list_workers(alias)
            return [t for w in listing.workers for t in w.tasks]

        wait_for(lambda: [t.id for t in running()] == ["long"], 10, "the task to be listed")
        (worker_info,) = list_workers(alias).workers
        assert worker_info.queues == ["slow"] and worker_info.pool == "solo"
        assert worker_info.concurrency == 1 and worker_info.processed == 0
        wait_for(lambda: not running(), 10, "the finished task to leave the record")
    finally:
        thread.join(15)
    assert not thread.is_alive()
    assert list_workers(alias).total == 0  # the clean stop removed it at once
    assert worker.summary.processed == 1


def test_each_worker_lists_only_its_own_running_tasks(alias: Any) -> None:
    """Two workers of one process on one queue: the running task is in its worker's record."""
    queue: Queue = alias.queue("slow")
    busy, idle = Worker([queue], burst=True), Worker([queue])
    tasks.slow.enqueue(args=["mine", 1.0], id="mine")
    idle_registration = Registration(idle)
    idle_registration.start()
    thread = threading.Thread(target=busy.run)
    thread.start()
    try:

        def tasks_of() -> dict[str, list[str]]:
            return {w.id: [t.id for t in w.tasks] for w in list_workers(alias).workers}

        wait_for(lambda: ["mine"] in tasks_of().values(), 10, "the running task to be listed")
        listed = tasks_of()
        assert listed[idle_registration.id] == []
        assert sorted(listed.values()) == [[], ["mine"]]
        assert [(q, t) for q, t, _ in busy.running()] == [("slow", "mine")]
        assert idle.running() == []
    finally:
        thread.join(15)
        idle_registration.stop()
    assert busy.running() == [] and "mine" not in busy.current


def test_the_registry_adds_no_receiver_to_the_task_signals(alias: Any) -> None:
    """The public task signals cost a worker nothing unless the project connects to them."""
    from django_redislock import signals

    registration = Registration(Worker([alias.queue("jobs")]))
    registration.start()
    try:
        for signal in (
            signals.task_started,
            signals.task_succeeded,
            signals.task_failed,
            signals.task_dead,
        ):
            assert not signal.has_listeners(Queue), signal
    finally:
        registration.stop()


def test_heartbeat_failures_are_logged_once_and_never_raise(
    caplog: pytest.LogCaptureFixture,
) -> None:
    params = {"LOCATION": "redis://127.0.0.1:1/0", "OPTIONS": {"SOCKET_CONNECT_TIMEOUT": 0.2}}
    with override_settings(REDISLOCK_QUEUES={"default": params}):
        registration = Registration(Worker([queues["default"].queue("jobs")]))
        with caplog.at_level(logging.WARNING, "django_redislock"):
            assert registration.beat() is False
            assert registration.beat() is False
            registration.stop()
    failed = [r for r in caplog.records if "heartbeat failed" in r.getMessage()]
    assert len(failed) == 1
    assert any("could not leave the registry" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"WORKER_HEARTBEAT": 10.0, "WORKER_HEARTBEAT_TTL": 10.0}, "WORKER_HEARTBEAT_TTL"),
        ({"WORKER_HEARTBEAT": 30.0}, "WORKER_HEARTBEAT_TTL"),
        ({"WORKER_HEARTBEAT": 0}, "WORKER_HEARTBEAT"),
        ({"WORKER_HEARTBEAT_TTL": "20"}, "WORKER_HEARTBEAT_TTL"),
    ],
)
def test_bad_heartbeat_options_name_the_option(options: dict[str, Any], named: str) -> None:
    from django_redislock.backends.redis import RedisQueueBackend

    with pytest.raises(ConfigurationError, match=named):
        RedisQueueBackend("x", {"LOCATION": "redis://127.0.0.1:1/0", "OPTIONS": options})


def test_list_workers_prints_a_table_with_control_characters_escaped(alias: Any) -> None:
    import io

    from django.core.management import call_command

    beat(alias, "w1", 60, record(host="evil\n\x1b[31mhost", tasks=[]))
    beat(alias, "w2", 60, record(host="web-2"))
    out = io.StringIO()
    call_command("list_workers", stdout=out)
    lines = out.getvalue().splitlines()
    assert lines[0].split() == [
        "host", "pid", "pool", "health", "queues", "processed", "failed", "heartbeat", "up",
        "running",
    ]  # fmt: skip
    assert lines[1].startswith("evil??[31mhost  4242  thread x8  ok      orders")
    assert lines[1].endswith("  -")
    assert "order-1 (orders, 1." in lines[2]
    assert lines[3] == "2 worker(s) alive on 'default'"
    assert "\x1b" not in out.getvalue()
