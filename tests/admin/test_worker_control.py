"""Worker control through the registry: quiet, resume and stop, acted on at the next heartbeat.

Issue 28 (what Flower and Sidekiq users rely on): an operator quiets a worker
(it claims nothing more, running tasks finish), resumes it, or stops it, from the
dashboard; the command rides the worker's own heartbeat script, so it costs no
round trip and acts within one ``WORKER_HEARTBEAT``. Real Worker threads on
fakeredis, the single server and the cluster.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from django.test import Client, override_settings

from django_redislock import queues
from django_redislock.exceptions import InvalidArgument
from django_redislock.queue import Queue
from django_redislock.queue.worker import Worker
from django_redislock.queue.workers import control_key, list_workers, send_command

from ..conftest import RedisTarget
from ..processes import wait_for
from ..testapp import tasks

FAST = {"WORKER_HEARTBEAT": 0.1, "WORKER_HEARTBEAT_TTL": 0.6}
BASE = "/admin/django_redislock/dashboard/"


@pytest.fixture
def alias(redis_target: RedisTarget) -> Iterator[Any]:
    params = {**redis_target.params(**FAST), "KEY_PREFIX": "ctl"}
    with override_settings(REDISLOCK_QUEUES={"default": params}):
        yield queues["default"]


def only_worker(alias: Any) -> Any:
    (info,) = list_workers(alias).workers
    return info


def test_quiet_resume_and_stop_a_running_worker(alias: Any) -> None:
    queue: Queue = tasks.unique_job.queue
    worker = Worker([queue])
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        wait_for(lambda: list_workers(alias).total == 1, 10, "the worker to register")
        worker_id = only_worker(alias).id
        send_command(alias, worker_id, "quiet")
        wait_for(lambda: only_worker(alias).quiet, 10, "the worker to say it is quiet")
        assert worker.quiet and alias.client.hget(control_key(alias), worker_id) is None
        tasks.unique_job.enqueue(args=[1, 2], id="while-quiet")
        processed = worker.summary.processed
        # several heartbeats and idle waits later, nothing was claimed
        for _ in range(3):
            beats: int = only_worker(alias).heartbeat

            def beat_after(before: int = beats) -> bool:
                return bool(only_worker(alias).heartbeat > before)

            wait_for(beat_after, 10, "a heartbeat")
        assert worker.summary.processed == processed and queue.get("while-quiet") is not None
        send_command(alias, worker_id, "resume")
        wait_for(lambda: queue.get("while-quiet") is None, 10, "the resumed worker to run it")
        assert not worker.quiet
        send_command(alias, worker_id, "stop")
        thread.join(30)
        assert not thread.is_alive()  # it stopped by itself
        assert list_workers(alias).total == 0  # and left the registry
    finally:
        worker.stop()
        thread.join(30)


def test_a_bad_command_is_refused_and_writes_nothing(alias: Any) -> None:
    with pytest.raises(InvalidArgument, match="command must be one of"):
        send_command(alias, "w1", "explode")
    assert not alias.client.exists(control_key(alias))


def test_the_workers_page_sends_commands_audited_with_manage_tasks(
    alias: Any, admin_client: Client, staff_client: Any
) -> None:
    from django.contrib.admin.models import LogEntry

    queue: Queue = alias.queue("jobs")
    worker = Worker([queue])
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        wait_for(lambda: list_workers(alias).total == 1, 10, "the worker to register")
        worker_id = only_worker(alias).id
        action = f"{BASE}workers/default/{worker_id}/quiet/"
        page = admin_client.get(BASE + "workers/").content.decode()
        assert f'href="{action}"' in page
        viewer = staff_client("view_dashboard", csrf=True)
        assert viewer.get(action).status_code == 403
        assert viewer.post(action).status_code == 403
        manager = staff_client("view_dashboard", "manage_tasks", csrf=True)
        assert manager.post(action).status_code == 403  # no CSRF token: refused
        confirm = admin_client.get(action).content.decode()
        assert 'id="confirm-quiet"' in confirm
        done = admin_client.post(action, follow=True).content.decode()
        assert "it acts at its next heartbeat" in done
        wait_for(lambda: only_worker(alias).quiet, 10, "the registry to say it is quiet")
        entry = LogEntry.objects.latest("pk")
        assert entry.object_id == f"worker:default:{worker_id}"
        assert entry.change_message.startswith("Quiet worker ")
        opened = admin_client.get(f"{BASE}{entry.object_id}/change/")
        assert opened.status_code == 302 and opened["Location"].endswith(f"?q={worker_id}")
        listed = admin_client.get(BASE + "workers/").content.decode()
        assert "worker-quiet" in listed and f"{BASE}workers/default/{worker_id}/resume/" in listed
        gone = admin_client.post(f"{BASE}workers/default/no-such-worker/stop/", follow=True)
        assert "is not running any more" in gone.content.decode()
        assert admin_client.get(f"{BASE}workers/default/{worker_id}/explode/").status_code == 404
    finally:
        worker.stop()
        thread.join(30)
