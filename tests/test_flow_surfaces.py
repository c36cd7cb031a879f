"""Pause/resume and rate limits where operators meet them: commands and metrics.

The admin's pause/resume action is tested in tests/admin/test_flow.py.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import override_settings

from django_redislock import queues
from django_redislock.queue import Queue

from .conftest import RedisTarget
from .test_metrics import TOKEN, samples, scrape, value


@pytest.fixture
def q(single_target: RedisTarget) -> Iterator[Queue]:
    params = {**single_target.params(), "KEY_PREFIX": "flowcmd"}
    with override_settings(REDISLOCK_QUEUES={"default": params}):
        queue: Queue = queues["default"].queue("jobs")
        queue.enqueue("a", 1)
        yield queue


def run(*args: str) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


# -- commands ------------------------------------------------------------------------------


def test_pause_and_resume_commands(q: Queue) -> None:
    assert run("pause_queue", "jobs") == "Paused queue 'jobs'.\n"
    assert q.is_paused() and q.pop() == []
    assert run("resume_queue", "jobs") == "Resumed queue 'jobs'.\n"
    assert run("resume_queue", "jobs") == "Queue 'jobs' was not paused.\n"
    assert [t.id for t in q.pop()] == ["a"]


def test_pause_of_an_unknown_queue_fails_and_pauses_nothing(q: Queue) -> None:
    with pytest.raises(CommandError, match=r"no queue 'typo'; known queues: 'jobs'"):
        run("pause_queue", "jobs", "typo")
    assert q.is_paused() is False  # the good name before the typo was not paused either


def test_a_queue_declared_by_a_task_can_be_paused_before_its_first_task(q: Queue) -> None:
    # tests.testapp.tasks declares queue "slow"; nothing was ever queued to it here
    assert run("pause_queue", "slow") == "Paused queue 'slow'.\n"
    assert queues["default"].queue("slow").is_paused()


def test_rate_limit_command(q: Queue) -> None:
    assert run("rate_limit_queue", "jobs") == "Queue 'jobs' has no rate limit.\n"
    assert run("rate_limit_queue", "jobs", "30/m") == "Queue 'jobs': at most 30/m.\n"
    assert q.rate_limit() == "30/m"
    with pytest.raises(CommandError, match="RATE must be a rate"):
        run("rate_limit_queue", "jobs", "30/minute")
    with pytest.raises(CommandError, match="no queue 'nope'"):
        run("rate_limit_queue", "nope", "1/s")
    assert q.rate_limit() == "30/m"
    assert run("rate_limit_queue", "jobs", "off") == "Queue 'jobs' has no rate limit.\n"
    assert q.rate_limit() is None


def test_queue_status_json_reports_paused_and_the_limit(q: Queue) -> None:
    q.pause()
    q.set_rate_limit("2/s")
    [row] = [r for r in json.loads(run("queue_status", "--json")) if r["queue"] == "jobs"]
    assert (row["paused"], row["rate_limit"]) == (True, "2/s")


# -- metrics -------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
@pytest.mark.urls("tests.metrics_urls")
def test_the_paused_gauge(single_target: RedisTarget) -> None:
    params = {**single_target.params(), "KEY_PREFIX": "flowm"}
    with override_settings(REDISLOCK_QUEUES={"default": params}, REDISLOCK_METRICS_TOKEN=TOKEN):
        q: Queue = queues["default"].queue("tests")
        q.enqueue("a", 1)
        queues["default"].queue("other").enqueue("b", 1)
        q.pause()
        found = samples(scrape().content.decode())
        assert value(found, "redislock_queue_paused", alias="default", queue="tests") == 1
        assert value(found, "redislock_queue_paused", alias="default", queue="other") == 0
