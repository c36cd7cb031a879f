"""The async pool starts no OS thread per task for a rate-limit check it does not need.

A task without ``rate_limit`` runs on the event loop without a helper thread; before, every
task's admission ran in a new thread (the no-op drain of the async pool paid for it).
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.test import override_settings

from django_redislock import queues
from django_redislock.queue import Queue
from django_redislock.queue.worker import Worker

from .conftest import RedisTarget
from .testapp import tasks

TASKS = 40


@pytest.mark.django_db(transaction=True)  # the worker closes stale database connections
def test_tasks_without_a_rate_limit_start_no_thread_each(
    single_target: RedisTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    params = {**single_target.params(), "KEY_PREFIX": "test"}
    with override_settings(REDISLOCK_QUEUES={"default": params}):
        for i in range(TASKS):
            tasks.wait_io_async.enqueue(args=[f"a{i}", 0], id=f"a{i}")
        q: Queue = queues["default"].queue("pool")
        started: list[str] = []
        start = threading.Thread.start

        def counting(self: threading.Thread, *args: Any, **kwargs: Any) -> None:
            started.append(self.name)
            start(self, *args, **kwargs)

        monkeypatch.setattr(threading.Thread, "start", counting)
        worker = Worker([q], pool="async", concurrency=8, burst=True, timeout=30)
        summary = worker.run()
    assert summary.succeeded == TASKS, summary
    # the worker's own threads (leases, limits, heartbeat, the loop): a handful, not one a task
    assert len(started) < 10, started
