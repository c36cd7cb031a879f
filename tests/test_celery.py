"""@distributed_lock / singleton on Celery tasks: eager mode, and a real worker process.

The lock owner is the Celery task id, so the hold can be found and released by
id from anywhere. The real-worker tests start ``celery -A tests.celery_app
worker --pool=solo`` against the session's own Redis (broker db 1, results
db 2), bounded in time and terminated at the end.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from django_redislock import distributed_lock, locks
from django_redislock.contrib.celery import current_task_id, release_task_lock

from .servers import RedisProcess

pytest.importorskip("celery")
from . import celery_app

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def eager() -> Iterator[None]:
    celery_app.app.conf.update(task_always_eager=True, task_eager_propagates=True)
    try:
        yield
    finally:
        celery_app.app.conf.update(task_always_eager=False, task_eager_propagates=False)


def test_eager_task_holds_the_lock_as_its_task_id(eager: None) -> None:
    result = celery_app.build_report.delay("e1")
    value = result.get()
    assert value == {"task_id": result.id, "owner": result.id}
    assert celery_app.holder_of("report:e1") is None  # released when the task returned


def test_eager_singleton_skips_while_another_run_holds_it(eager: None) -> None:
    other = locks["default"].lock("report:e2", owner="another-task-id", ttl=10)
    assert other.acquire()
    try:
        assert celery_app.build_report.delay("e2").get() is None
    finally:
        other.release()
    assert celery_app.build_report.delay("e2").get()["owner"] is not None


def test_another_process_releases_by_task_id(eager: None) -> None:
    task_id = celery_app.take_and_leave.delay("job:e").get()
    assert celery_app.holder_of("job:e") == task_id
    assert release_task_lock("job:e", "someone-else") is False
    assert release_task_lock("job:e", task_id) is True
    assert celery_app.holder_of("job:e") is None


def test_owner_outside_a_task_is_a_random_token() -> None:
    assert current_task_id() is None
    with distributed_lock("plain-call", owner="celery") as lock:
        assert lock.owner is None  # a random per-hold token, as without owner=


def test_owner_callable_and_validation() -> None:
    @distributed_lock("job:{n}", owner=lambda n: f"caller-{n}")
    def job(n: int) -> str | None:
        return celery_app.holder_of(f"job:{n}")

    assert job(3) == "caller-3"
    with pytest.raises(ValueError, match="owner must be"):
        distributed_lock("x", owner="")


# -- a real worker -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def worker(redis_server: RedisProcess) -> Iterator[Any]:
    """A worker subprocess, and a client app (broker and results on the test's server)."""
    from celery import Celery

    client = redis_server.client()
    for db in (1, 2):
        client.execute_command("SELECT", db)
        client.flushdb()
    client.execute_command("SELECT", 0)
    base = redis_server.url.rsplit("/", 1)[0]
    client_app = Celery("client", broker=f"{base}/1", backend=f"{base}/2")
    client_app.conf.update(task_serializer="json", accept_content=["json"])
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.celery_settings",
        "REDISLOCK_TEST_URL": redis_server.url,
    }
    command = [sys.executable, "-m", "celery", "-A", "tests.celery_app", "worker"]
    command += ["--pool=solo", "--concurrency=1", "--without-gossip", "--without-mingle"]
    command += ["--without-heartbeat", "--loglevel=WARNING"]
    process = subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + 60
        while not client_app.control.ping(timeout=0.5):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the Celery worker did not start: {process.stderr}")
        yield client_app
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)


def call(client_app: Any, name: str, *args: Any) -> Any:
    """Send ``tests.celery_app.<name>`` to the worker and wait (bounded) for its result."""
    result = client_app.send_task(f"tests.celery_app.{name}", args=list(args))
    return result.id, result.get(timeout=30)


@pytest.mark.slow
def test_real_worker_runs_the_singleton_as_its_task_id(worker: Any) -> None:
    other = locks["default"].lock("report:w1", owner="another-task-id", ttl=30)
    assert other.acquire()
    try:
        assert call(worker, "build_report", "w1")[1] is None  # skipped: another run holds it
    finally:
        other.release()
    task_id, value = call(worker, "build_report", "w1")
    assert value == {"task_id": task_id, "owner": task_id}
    assert celery_app.holder_of("report:w1") is None


@pytest.mark.slow
def test_real_worker_retry_keeps_the_task_id_as_owner(worker: Any) -> None:
    task_id, holders = call(worker, "retry_once", "r1")
    assert holders == [task_id, task_id]  # both attempts held the lock as the same id
    assert celery_app.holder_of("retry:r1") is None


@pytest.mark.slow
def test_real_worker_hold_is_released_by_another_task(worker: Any) -> None:
    task_id, returned = call(worker, "take_and_leave", "job:w")
    assert returned == task_id
    assert celery_app.holder_of("job:w") == task_id  # the task returned, the hold stays
    assert call(worker, "release_for", "job:w", task_id)[1] is True
    assert celery_app.holder_of("job:w") is None
    assert call(worker, "release_for", "job:w", task_id)[1] is False
