"""Real drain_queue processes in the workers registry: listed, their task shown, and gone.

On the real single server and cluster: a worker appears in ``list_workers --json``
with the right fields, shows the slow task it runs, leaves at once on SIGTERM and
vanishes within its heartbeat TTL after SIGKILL.
"""

from __future__ import annotations

import io
import json
import signal
import time
from collections.abc import Callable
from typing import Any

import pytest
from django.core.management import call_command

from .conftest import RedisTarget
from .processes import finish, spawn, wait_for
from .testapp import tasks

pytestmark = pytest.mark.slow

#: A short heartbeat so the SIGKILL test waits seconds, not the default 20.
OPTIONS = {"WORKER_HEARTBEAT": 0.2, "WORKER_HEARTBEAT_TTL": 2.0}


def listed() -> dict[str, Any]:
    out = io.StringIO()
    call_command("list_workers", "--json", stdout=out)
    document: dict[str, Any] = json.loads(out.getvalue())
    return document


def worker_of(pid: int) -> Callable[[], dict[str, Any] | None]:
    def find() -> dict[str, Any] | None:
        return next((w for w in listed()["workers"] if w["pid"] == pid), None)

    return find


def test_a_worker_lists_itself_its_task_and_leaves_on_sigterm(real: RedisTarget) -> None:
    tasks.slow.enqueue(args=["long", 4.0], id="long")
    worker = spawn(real, "slow", "--batch", "1", options=OPTIONS)
    try:
        found = worker_of(worker.pid)
        wait_for(lambda: bool(found() and found()["tasks"]), 30, "the worker and its task")  # type: ignore[index]
        entry = found()
        assert entry is not None
        assert entry["alias"] == "default" and entry["queues"] == ["slow"]
        assert (entry["pool"], entry["concurrency"]) == ("solo", 1)
        assert entry["host"] and entry["heartbeat_age"] < 2.0
        (task,) = entry["tasks"]
        assert (task["id"], task["queue"]) == ("long", "slow")
        assert 0 <= task["running_for"] < 10
        worker.send_signal(signal.SIGTERM)
        code, _, err = finish(worker, timeout=20)
    finally:
        worker.kill()
    assert code == 0, err
    # gone at once, not after the TTL: the stop removed it before the process exited
    assert worker_of(worker.pid)() is None


def test_a_sigkilled_worker_vanishes_within_its_ttl(real: RedisTarget) -> None:
    worker = spawn(real, "slow", options=OPTIONS)
    try:
        wait_for(lambda: worker_of(worker.pid)() is not None, 30, "the worker to register")
        worker.send_signal(signal.SIGKILL)
        killed_at = time.monotonic()
        finish(worker)
    finally:
        worker.kill()
    assert worker_of(worker.pid)() is not None  # still listed: nothing removed it
    waited = wait_for(lambda: worker_of(worker.pid)() is None, 20, "the record to expire")
    # within the TTL (2 s) of its last heartbeat, which was at most 0.2 s before the kill
    assert time.monotonic() - killed_at < OPTIONS["WORKER_HEARTBEAT_TTL"] + 1.5
    assert waited > 0.5  # it did wait for the TTL: nothing removed it early


def test_list_workers_says_when_none_run(real: RedisTarget) -> None:
    out = io.StringIO()
    call_command("list_workers", stdout=out)
    assert out.getvalue() == "No workers running on 'default'.\n"
    assert listed() == {"alias": "default", "total": 0, "workers": [], "unreadable": []}
