"""Refusals that must come as the library's own errors, with Redis unchanged.

* a sale window that closes before it opens (both bounds given, or one against the stored
  one) is an ``InvalidArgument`` naming the arguments;
* an enqueue when Redis is at ``maxmemory`` raises ``ServerOutOfMemory`` (a
  ``RedisLockError``), not redis-py's ``OutOfMemoryError``.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from datetime import timezone as dt_timezone
from pathlib import Path

import pytest

from django_redislock.backends.redis import RedisLockBackend, RedisQueueBackend
from django_redislock.exceptions import InvalidArgument, RedisLockError, ServerOutOfMemory

from .conftest import RedisTarget
from .servers import RedisProcess
from .test_inventory import make_stock

NOON = datetime(2030, 5, 1, 12, 0, tzinfo=dt_timezone.utc)


def test_a_window_that_closes_before_it_opens_is_refused(redis_target: RedisTarget) -> None:
    stock = make_stock(redis_target)
    stock.set(5, opens=NOON, closes=NOON + timedelta(hours=1))
    before = stock.stats()
    for opens, closes in ((NOON, NOON - timedelta(hours=1)), (NOON, NOON)):
        with pytest.raises(InvalidArgument, match=r"closes \(.*\) must be after opens"):
            stock.set(3, opens=opens, closes=closes)
    # one bound given, the other kept from the stored window
    with pytest.raises(InvalidArgument, match="closes must be after opens"):
        stock.set(3, closes=NOON - timedelta(minutes=1))
    with pytest.raises(InvalidArgument, match="closes must be after opens"):
        stock.set(3, opens=NOON + timedelta(hours=2))
    after = stock.stats()
    assert (after.remaining, after.opens, after.closes) == (5, before.opens, before.closes)
    # open-ended bounds, and a valid move of one bound, still work
    assert stock.set(4, closes=NOON + timedelta(hours=3)) == 4
    assert stock.set(4, opens=None) == 4


@pytest.fixture
def full_server(tmp_path: Path) -> Iterator[RedisProcess]:
    """A server of the test's own with a tiny ``maxmemory`` and no eviction."""
    extra = ["--maxmemory", "3mb", "--maxmemory-policy", "noeviction"]
    server = RedisProcess(tmp_path / "full", extra=extra).start()
    try:
        yield server
    finally:
        server.stop()


def test_an_enqueue_at_maxmemory_raises_the_library_error(full_server: RedisProcess) -> None:
    backend = RedisQueueBackend("full", {"LOCATION": full_server.url, "KEY_PREFIX": "full"})
    queue = backend.queue("jobs")
    blob = "x" * 100_000
    caught: BaseException | None = None
    for i in range(200):  # 20 MB at most: well past 3 MB
        try:
            queue.enqueue(f"t{i}", {"blob": blob})
        except Exception as exc:
            caught = exc
            break
    assert isinstance(caught, ServerOutOfMemory), repr(caught)
    assert isinstance(caught, RedisLockError)
    assert "maxmemory" in str(caught)
    ready = queue.stats()["ready"]
    with pytest.raises(ServerOutOfMemory):
        queue.enqueue("one-more", {"blob": blob})
    assert queue.stats()["ready"] == ready  # nothing was queued by the refused calls
    assert queue.get("one-more") is None


def test_a_lock_acquire_at_maxmemory_raises_the_library_error(full_server: RedisProcess) -> None:
    """The lock calls' hot path hands OOM to ``errors()`` too (it let the raw error out)."""
    backend = RedisLockBackend("full", {"LOCATION": full_server.url, "KEY_PREFIX": "full"})
    filler = RedisQueueBackend("full", {"LOCATION": full_server.url, "KEY_PREFIX": "full"})
    queue = filler.queue("jobs")
    with pytest.raises(ServerOutOfMemory):
        for i in range(200):  # 20 MB at most: well past 3 MB
            queue.enqueue(f"t{i}", {"blob": "x" * 100_000})
    lock = backend.lock("full-lock", ttl=5)
    with pytest.raises(ServerOutOfMemory, match="maxmemory"):
        lock.acquire(blocking=False)
    assert not lock.locked()  # nothing was written
