"""Operator commands: purge_queue, requeue_dead, remove_task, queue_status."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from unittest import mock

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import override_settings

from django_redislock import queues
from django_redislock.queue import Queue

from .conftest import RedisTarget


@pytest.fixture
def q(redis_target: RedisTarget) -> Iterator[Queue]:
    params = {**redis_target.params(MAX_ATTEMPTS=1), "KEY_PREFIX": "test"}
    with override_settings(REDISLOCK_QUEUES={"default": params, "other": params}):
        queue: Queue = queues["default"].queue("jobs")
        yield queue


def run(*args: str) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def test_purge_asks_first(q: Queue) -> None:
    q.enqueue_many([(f"t{i}", i) for i in range(5)])
    with mock.patch("builtins.input", return_value="no"), pytest.raises(CommandError):
        run("purge_queue", "jobs")
    assert q.stats()["ready"] == 5
    with mock.patch("builtins.input", return_value="yes") as asked:
        assert "Deleted 5 task(s)" in run("purge_queue", "jobs")
    assert "Delete all 5 task(s) of queue 'jobs'?" in asked.call_args.args[0]
    q.enqueue("x")
    assert "Deleted 1 task(s)" in run("purge_queue", "jobs", "--yes")
    assert q.stats()["ready"] == 0


def test_requeue_dead_all_or_by_id(q: Queue) -> None:
    q.enqueue_many([(f"t{i}", i) for i in range(3)])
    for task in q.pop(3):
        q.retry(task, error="x")
    assert "Requeued 1 dead task(s)" in run("requeue_dead", "jobs", "--id", "t1")
    assert "Requeued 2 dead task(s)" in run("requeue_dead", "jobs")
    assert q.stats()["ready"] == 3 and q.stats()["dead"] == 0


def test_remove_task(q: Queue) -> None:
    q.enqueue("a")
    assert "Removed task 'a'" in run("remove_task", "jobs", "a")
    with pytest.raises(CommandError, match="No task 'a'"):
        run("remove_task", "jobs", "a")
    with pytest.raises(CommandError, match="id"):
        run("remove_task", "jobs", "")


def test_queue_status_covers_every_alias(q: Queue) -> None:
    q.enqueue("a")
    q.enqueue("b", delay=60)
    queues["other"].queue("mail").enqueue("m")
    rows = json.loads(run("queue_status", "--json"))
    by_key = {(row["alias"], row["queue"]): row for row in rows}
    assert by_key[("default", "jobs")]["ready"] == 1
    assert by_key[("default", "jobs")]["delayed"] == 1
    assert by_key[("other", "mail")]["ready"] == 1
    only = json.loads(run("queue_status", "--json", "--using", "other"))
    assert {row["alias"] for row in only} == {"other"}
    text = run("queue_status", "--using", "default")
    assert any(line.split()[:4] == ["default", "jobs", "1", "1"] for line in text.splitlines())


def test_unknown_alias(q: Queue) -> None:
    with pytest.raises(CommandError, match="nope"):
        run("purge_queue", "jobs", "--using", "nope", "--yes")
    with pytest.raises(CommandError, match="nope"):
        run("queue_status", "--using", "nope")
