"""A real ``drain_queue`` process drains a mixed-priority backlog in priority order."""

from __future__ import annotations

import time

import pytest

from django_redislock import queues
from django_redislock.queue import Queue

from .conftest import RedisTarget
from .processes import spawn
from .testapp import tasks

pytestmark = pytest.mark.slow


def test_a_worker_runs_a_mixed_backlog_highest_level_first(real: RedisTarget) -> None:
    queue: Queue = queues["default"].queue("tests")
    expected: list[str] = []
    for level in (0, 3, 9, 5):  # enqueued lowest-ish first, so due order alone would be wrong
        tags = [f"p{level}-{i}" for i in range(4)]
        tasks.remember.enqueue_many([([tag], {}) for tag in tags], priority=level)
    for level in (9, 5, 3, 0):
        expected += [f"p{level}-{i}" for i in range(4)]
    tasks.urgent.delay("u")  # @task(priority=7)
    expected.insert(4, "urgent:u")
    # a delayed top-level task is not run before its time: it is still waiting at the end
    tasks.remember.enqueue(args=["late"], delay=3600, priority=9)
    assert queue.stats()["ready"] == len(expected)
    worker = spawn(real, "tests", "--burst", "--batch", "1")
    try:
        _out, err = worker.communicate(timeout=60)
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait(10)
    assert worker.returncode == 0, err
    assert tasks.runs() == expected
    stats = queue.stats()
    assert (stats["ready"], stats["delayed"], stats["in_flight"]) == (0, 1, 0)
    late = queue.tasks("delayed")
    assert [(t.priority, t.payload["args"]) for t in late] == [(9, ["late"])]
    assert time.time() < late[0].when.timestamp()
