"""A Celery app for tests/test_celery.py: eager in-process, or a real worker subprocess.

The worker is started as ``celery -A tests.celery_app worker --pool=solo`` with
``DJANGO_SETTINGS_MODULE=tests.celery_settings`` and the test's own Redis in
``REDISLOCK_TEST_URL`` (broker on db 1, results on db 2); nothing here has a
default server.
"""

from __future__ import annotations

import os
import time
from typing import Any

import django
from celery import Celery, current_task

if os.environ.get("DJANGO_SETTINGS_MODULE") == "tests.celery_settings":
    django.setup()

from django_redislock import locks
from django_redislock.contrib.celery import release_task_lock, singleton

url = os.environ.get("REDISLOCK_TEST_URL", "redis://127.0.0.1:1/0").rsplit("/", 1)[0]
app = Celery("redislock_tests", broker=f"{url}/1", backend=f"{url}/2")
app.conf.update(
    task_serializer="json",
    result_serializer="json",
    accept_content=["json"],
    broker_connection_retry_on_startup=True,
    worker_hijack_root_logger=False,
)


def holder_of(name: str) -> str | None:
    """The owner recorded for a held lock (from the lock index), or None."""
    for held in locks["default"].held_locks(prefix=name):
        if held.name == name:
            return str(held.owner)
    return None


@app.task(bind=True)
@singleton("report:{day}", ttl=60)
def build_report(self: Any, day: str, seconds: float = 0.0) -> dict[str, Any]:
    """Reports who holds the lock while it runs: the task id."""
    time.sleep(seconds)
    return {"task_id": self.request.id, "owner": holder_of(f"report:{day}")}


@app.task(bind=True, max_retries=1, default_retry_delay=0)
@singleton("retry:{tag}", ttl=60)
def retry_once(self: Any, tag: str) -> list[str | None]:
    """Retries once; each attempt records who held the lock while it ran."""
    key = f"test:{{celery}}:{tag}:{self.request.id}"
    client = locks["default"].client  # type: ignore[attr-defined]
    client.rpush(key, holder_of(f"retry:{tag}") or "")
    if self.request.retries == 0:
        raise self.retry(countdown=0)
    return [item.decode() for item in client.lrange(key, 0, -1)]


@app.task(bind=True)
def take_and_leave(self: Any, name: str) -> str:
    """Take a lock in the name of this task and return without releasing it (a lost worker)."""
    assert locks["default"].lock(name, owner=current_task.request.id, ttl=60).acquire()
    return str(self.request.id)


@app.task
def release_for(name: str, task_id: str) -> bool:
    """Another task (on any worker) releases the hold of ``task_id``."""
    return release_task_lock(name, task_id)
