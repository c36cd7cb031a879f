"""Fixtures of the admin dashboard tests: aliases on a test server, users with some permissions."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import Permission
from django.test import Client, override_settings

from django_redislock.handlers import locks, queues

from ..conftest import RedisTarget
from ..servers import RedisProcess


@dataclass
class Dashboard:
    """The default lock and queue aliases, pointed at one test target."""

    target: RedisTarget
    kind: str

    @property
    def locks(self) -> Any:
        return locks["default"]

    @property
    def queues(self) -> Any:
        return queues["default"]

    def queue(self, name: str = "orders") -> Any:
        return queues["default"].queue(name)


def point_at(target: RedisTarget) -> Any:
    params = {**target.params(), "KEY_PREFIX": "adm"}
    return override_settings(
        REDISLOCK_LOCKS={"default": params}, REDISLOCK_QUEUES={"default": params}
    )


@pytest.fixture
def dashboard(redis_target: RedisTarget) -> Iterator[Dashboard]:
    """The dashboard's aliases on fakeredis, the single server and the cluster in turn."""
    with point_at(redis_target):
        yield Dashboard(redis_target, redis_target.kind)


@pytest.fixture
def fake(fakeredis_target: RedisTarget) -> Iterator[Dashboard]:
    """The dashboard's aliases on a private fakeredis (fast tests of views and permissions)."""
    with point_at(fakeredis_target):
        yield Dashboard(fakeredis_target, "fakeredis")


@pytest.fixture
def single(single_target: RedisTarget) -> Iterator[Dashboard]:
    """The dashboard's aliases on the real single server only."""
    with point_at(single_target):
        yield Dashboard(single_target, "single")


@pytest.fixture
def staff_client(django_user_model: Any, db: None) -> Callable[..., Client]:
    """``staff_client("view_dashboard", ...)``: a logged-in staff user with those permissions."""

    def make(*codenames: str, csrf: bool = False) -> Client:
        user = django_user_model.objects.create_user(
            username="staff-" + "-".join(codenames or ("none",)), password="pw", is_staff=True
        )
        perms = Permission.objects.filter(
            content_type__app_label="django_redislock", codename__in=codenames
        )
        assert perms.count() == len(codenames)
        user.user_permissions.add(*perms)
        client = Client(enforce_csrf_checks=csrf)
        client.force_login(user)
        return client

    return make


BASE = "/admin/django_redislock/dashboard/"


def dead_task(queue: Any, id: str, error: str = "boom") -> None:
    """Put ``id`` in the dead-letter set through the real pop/retry path."""
    queue.enqueue(id, {"id": id})
    claimed = queue.pop(100)
    mine = [t for t in claimed if t.id == id]
    assert mine, f"{id} was not claimed"
    queue.release([t for t in claimed if t.id != id])  # the others go back in their place
    assert queue.retry(mine[0], error=error, max_attempts=1) == "dead"


def grant_many(backend: Any, names: list[str], ttl: float = 60) -> list[int]:
    """Take many mutexes through the real acquire script in one pipeline; returns fences."""
    from django_redislock.locking.pipeline import run_scripts

    calls = []
    for name in names:
        lock = backend.lock(name, ttl=ttl)
        owner = f"owner-{name}"
        calls.append(lock._attempt(owner, lock.meta("t", None), False, 0))
    results = run_scripts(backend, calls)
    assert all(int(r[0]) == 1 for r in results)
    return [int(r[1]) for r in results]


@pytest.fixture
def stopped_server(tmp_path: Path) -> Iterator[RedisProcess]:
    """A redis-server of this test, stopped with SIGSTOP: it accepts and never answers."""
    server = RedisProcess(tmp_path / "stopped").start()
    assert server.process is not None
    os.kill(server.process.pid, signal.SIGSTOP)
    try:
        yield server
    finally:
        os.kill(server.process.pid, signal.SIGCONT)
        server.stop()
