"""Results stored by real ``drain_queue`` processes, read by this one (single server, cluster)."""

from __future__ import annotations

import asyncio
import signal

import pytest

from django_redislock import queues
from django_redislock.exceptions import TaskFailed
from django_redislock.queue.results import ResultStatus

from . import result_tasks as rt
from .conftest import RedisTarget
from .processes import finish, spawn, wait_for

pytestmark = pytest.mark.slow
MODULES = ["tests.result_tasks"]


def starts() -> list[str]:
    client = queues["default"].client  # type: ignore[attr-defined]
    return [item.decode() for item in client.lrange(rt.STARTS_KEY, 0, -1)]


def test_a_worker_process_stores_values_and_errors(real: RedisTarget) -> None:
    worker = spawn(real, "results", task_modules=MODULES)
    try:
        assert rt.add.delay(20, 22).result(timeout=30) == 42
        assert asyncio.run(rt.add.delay(1, 2).result_async(timeout=30)) == 3
        failing = rt.explode.delay("in a worker")
        with pytest.raises(TaskFailed, match="ValueError: exploded: in a worker"):
            failing.result(timeout=30)
        assert failing.status is ResultStatus.FAILED
        worker.send_signal(signal.SIGTERM)
        code, out, err = finish(worker)
    finally:
        worker.kill()
    assert code == 0, err
    assert "processed 3, failed 1, retried 0, dead 1" in out


def test_a_waiter_outlives_a_worker_killed_mid_task(real: RedisTarget) -> None:
    handle = rt.nap_once.delay("slow", 2.0)
    first = spawn(real, "results", "--lease", "1", task_modules=MODULES)
    try:
        wait_for(lambda: len(starts()) == 1, 30, "the first run to start")
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=10)
        assert handle.status is ResultStatus.RUNNING  # its lease has not ended yet
        second = spawn(real, "results", "--lease", "5", task_modules=MODULES)
        try:
            value = handle.result(timeout=60)
            second.send_signal(signal.SIGTERM)
            finish(second)
        finally:
            second.kill()
    finally:
        first.kill()
    first_pid = starts()[0].split(":")[1]
    assert value.startswith("slow:") and value != f"slow:{first_pid}"
    assert len(starts()) == 2
