"""``list_locks`` and ``release_lock``: thin wrappers over the public lock API."""

from __future__ import annotations

import json
from collections.abc import Iterator
from io import StringIO
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from django_redislock import locks
from django_redislock.exceptions import LockLost


@pytest.fixture(autouse=True)
def _clean_default(redis_server: Any) -> Iterator[None]:
    redis_server.client().flushall()
    yield
    redis_server.client().flushall()


def run(*args: str) -> str:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def test_list_locks_text_and_json() -> None:
    assert "No locks held." in run("list_locks")
    first = locks["default"].lock("order:1", ttl=30)
    first.acquire()
    second = locks["default"].lock("user:9", ttl=30, reentrant=True)
    second.acquire()
    second.acquire()
    text = run("list_locks")
    assert "order:1  mutex  fence=" in text and "user:9  reentrant x2" in text
    assert "2 of 2 held" in text
    document = json.loads(run("list_locks", "--json", "--prefix", "order:"))
    assert document["total"] == 2 and document["next_after"] is None
    [held] = document["locks"]
    assert held["name"] == "order:1" and held["fence"] == first.fence
    paged = json.loads(run("list_locks", "--json", "--limit", "1"))
    assert [h["name"] for h in paged["locks"]] == ["order:1"] and paged["next_after"] == "order:1"
    assert paged["previous_before"] is None
    text = run("list_locks", "--limit", "1", "--after", "order:1")
    assert "user:9" in text and "previous page: --before 'user:9'" in text
    back = json.loads(run("list_locks", "--json", "--limit", "1", "--before", "user:9"))
    assert [h["name"] for h in back["locks"]] == ["order:1"]
    assert back["next_after"] == "order:1" and back["previous_before"] is None
    first.release()
    second.release()
    second.release()


def test_list_locks_errors() -> None:
    with pytest.raises(CommandError, match="nope"):
        run("list_locks", "--using", "nope")
    with pytest.raises(CommandError, match="limit"):
        run("list_locks", "--limit", "-4")
    with pytest.raises(CommandError, match="not both"):
        run("list_locks", "--after", "a", "--before", "b")


def test_release_lock_asks_then_releases(monkeypatch: pytest.MonkeyPatch) -> None:
    lock = locks["default"].lock("stuck", ttl=30)
    lock.acquire()
    monkeypatch.setattr("builtins.input", lambda prompt: "n")
    with pytest.raises(CommandError, match="Not released"):
        run("release_lock", "stuck")
    lock.ensure_held()
    monkeypatch.setattr("builtins.input", lambda prompt: "yes")
    assert "Released 'stuck'" in run("release_lock", "stuck")
    with pytest.raises(LockLost):
        lock.ensure_held()
    assert "was not held" in run("release_lock", "stuck", "--yes")


def test_release_lock_errors() -> None:
    with pytest.raises(CommandError, match="name"):
        run("release_lock", "", "--yes")
    with pytest.raises(CommandError, match="nope"):
        run("release_lock", "x", "--using", "nope", "--yes")
