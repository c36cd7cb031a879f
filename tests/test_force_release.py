"""What a force-release (``release_lock``, the admin) guarantees, exactly as the docs say it.

It ends the hold and bumps the fence. The old holder learns of it at its next
check, extension, renewal or release (``LockLost``), and every later grant has a
larger fence, so the old holder's fenced writes are refused once the resource
has recorded a newer fence. It does **not** stop a fenced write that the old
holder makes before any newer holder has written: the resource has not yet seen
a newer fence to compare with.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from django.core.management import call_command

from django_redislock.backends.redlock import RedlockBackend
from django_redislock.exceptions import LockLost
from django_redislock.locking import fenced_update
from tests.testapp.models import FencedRecord

from .conftest import RedisTarget
from .servers import RedisProcess


@pytest.fixture(params=["single", "redlock"])
def backend(request: pytest.FixtureRequest) -> Any:
    if request.param == "single":
        target: RedisTarget = request.getfixturevalue("single_target")
        return target.lock_backend()
    servers: list[RedisProcess] = request.getfixturevalue("redlock_servers")
    return RedlockBackend(
        "quorum",
        {
            "LOCATION": [server.url for server in servers],
            "KEY_PREFIX": f"fr{uuid.uuid4().hex[:8]}",
            "OPTIONS": {"QUARANTINE_FRESH_MASTERS": False, "MASTER_TIMEOUT": 2.0},
        },
    )


@pytest.mark.django_db
def test_old_holder_is_fenced_out_only_once_a_newer_fence_was_written(backend: Any) -> None:
    row = FencedRecord.objects.create(name="r", value="initial", fence=0)
    rows = FencedRecord.objects.filter(pk=row.pk)
    old = backend.lock("stock:1", ttl=30)
    assert old.acquire(blocking=False)
    assert backend.force_release("stock:1") is True
    newer = backend.lock("stock:1", ttl=30)
    assert newer.acquire(blocking=False) and newer.fence > old.fence
    assert fenced_update(rows, newer.fence, value="newer holder")
    assert not fenced_update(rows, old.fence, value="old holder")  # refused: a newer fence
    assert FencedRecord.objects.get(pk=row.pk).value == "newer holder"
    with pytest.raises(LockLost):
        old.ensure_held()
    newer.release()


@pytest.mark.django_db
def test_old_holder_still_writes_before_any_newer_fence_is_recorded(backend: Any) -> None:
    row = FencedRecord.objects.create(name="r", value="initial", fence=0)
    old = backend.lock("stock:2", ttl=30)
    assert old.acquire(blocking=False)
    assert backend.force_release("stock:2") is True
    # Nothing newer has written: the resource cannot tell that this fence is stale.
    assert fenced_update(FencedRecord.objects.filter(pk=row.pk), old.fence, value="old holder")
    with pytest.raises(LockLost):
        old.release()


def test_release_lock_help_says_what_it_guarantees(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        call_command("release_lock", "--help")
    text = " ".join(capsys.readouterr().out.split())
    assert "does not stop a fenced write" in text and "newer fence" in text
