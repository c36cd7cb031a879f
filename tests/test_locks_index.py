"""The admin index: listing and counting held locks without KEYS, pruning expired entries."""

from __future__ import annotations

import time
from typing import Any

import pytest

from django_redislock.exceptions import InvalidArgument
from django_redislock.locks import index, pipeline
from django_redislock.locks.pipeline import run_scripts

from .conftest import RedisTarget


def grant_many(backend: Any, names: list[str], ttl: float = 30) -> None:
    """Take many mutexes at once through the real acquire script (one pipeline)."""
    calls = []
    for name in names:
        lock = backend.lock(name, ttl=ttl)
        calls.append(
            lock._attempt(f"owner-{name}", lock.meta(f"owner-{name}", "u", "t", None), False, 0)
        )
    results = run_scripts(backend, calls)
    assert all(int(r[0]) == 1 for r in results)


def test_lists_holders_with_metadata(redis_target: RedisTarget) -> None:
    backend = redis_target.lock_backend()
    rw = backend.read_write_lock("doc:1", ttl=20)
    with backend.lock("order:1", ttl=20) as lock, rw.read(), rw.read():
        held = {h.name: h for h in backend.held_locks()}
        assert set(held) == {"order:1", "doc:1"}
        order = held["order:1"]
        assert (order.kind, order.fence, order.count, order.ttl) == ("mutex", lock.fence, 1, 20)
        assert order.pid is not None and order.host and order.thread == "MainThread"
        assert 19 < order.expires_in <= 20 and order.acquired_at is not None
        assert (held["doc:1"].kind, held["doc:1"].count) == ("read", 2)
        assert order.as_dict()["acquired_at"].startswith("20")
        assert backend.held_lock_count() == 2
    assert backend.held_locks() == [] and backend.held_lock_count() == 0


def test_pages_by_name_with_prefix(redis_target: RedisTarget) -> None:
    backend = redis_target.lock_backend()
    names = [f"order:{i:03d}" for i in range(50)] + [f"user:{i}" for i in range(5)]
    grant_many(backend, names)
    seen: list[str] = []
    after = None
    for _ in range(10):
        page = backend.held_locks_page(prefix="order:", limit=20, after=after)
        assert page.total == 55
        seen += [h.name for h in page.locks]
        after = page.next_after
        if after is None:
            break
    assert seen == names[:50]
    assert [h.name for h in backend.held_locks(prefix="user:")] == names[50:]
    assert backend.held_locks(prefix="nothing") == []


def test_expired_entries_are_pruned(redis_target: RedisTarget) -> None:
    backend = redis_target.lock_backend()
    grant_many(backend, [f"short:{i}" for i in range(30)], ttl=0.2)
    grant_many(backend, ["long"], ttl=30)
    time.sleep(0.3)
    assert [h.name for h in backend.held_locks()] == ["long"]
    assert backend.held_lock_count() == 1
    bucket_sizes = 0
    from django_redislock.locks.keys import BucketKeys

    for b in range(backend.options["LOCK_INDEX_BUCKETS"]):
        bucket_sizes += redis_target.raw.zcard(BucketKeys.build(backend, b).names)
    assert bucket_sizes == 1


def test_a_page_is_one_pipeline_whatever_the_number_held(
    redis_target: RedisTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = redis_target.lock_backend()
    backend.held_locks()  # loads the script
    sends: list[int] = []
    real_send = pipeline._send

    def counting_send(client: Any, calls: Any) -> Any:
        sends.append(len(calls))
        return real_send(client, calls)

    monkeypatch.setattr(pipeline, "_send", counting_send)
    from redis.connection import AbstractConnection

    requests = [0]
    real_request = AbstractConnection.send_packed_command

    def counting_request(self: Any, command: Any, check_health: bool = True) -> None:
        requests[0] += 1
        real_request(self, command, check_health)

    monkeypatch.setattr(AbstractConnection, "send_packed_command", counting_request)
    for held in (0, 10_000 if redis_target.kind != "fakeredis" else 2_000):
        if held:
            names = [f"lock:{i:05d}" for i in range(held)]
            for start in range(0, held, 2000):
                grant_many(backend, names[start : start + 2000])
        sends.clear()
        requests[0] = 0
        page = backend.held_locks_page(limit=100)
        assert len(page.locks) == min(held, 100) and page.total == held
        # One pipeline of one script per bucket: one round trip on a single server,
        # one per master on a cluster (redis-py groups a cluster pipeline by node).
        assert sends == [backend.options["LOCK_INDEX_BUCKETS"]]
        if redis_target.kind == "single":
            assert requests[0] == 1
        elif redis_target.kind == "cluster":
            assert 1 <= requests[0] <= 3  # one request per master


def test_listing_bad_arguments(redis_target: RedisTarget) -> None:
    backend = redis_target.lock_backend()
    with pytest.raises(InvalidArgument, match="limit"):
        backend.held_locks(limit=-1)
    with pytest.raises(InvalidArgument, match="limit"):
        backend.held_locks(limit=10**6)
    with pytest.raises(InvalidArgument, match="prefix"):
        backend.held_locks(prefix=3)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match="after"):
        backend.held_locks(after="")
    with pytest.raises(InvalidArgument, match="name"):
        backend.force_release("")
    assert index.MAX_PAGE == 1000


def test_a_stale_count_does_not_leak_into_the_next_hold(redis_target: RedisTarget) -> None:
    backend = redis_target.lock_backend()
    reentrant = backend.lock("job", ttl=0.2, reentrant=True)
    reentrant.acquire()
    reentrant.acquire()
    time.sleep(0.3)  # expires with count 2, never released
    with backend.lock("job", ttl=5):
        [held] = backend.held_locks()
        assert (held.kind, held.count) == ("mutex", 1)
    with backend.lock("job", ttl=5, reentrant=True):
        [held] = backend.held_locks()
        assert (held.kind, held.count) == ("reentrant", 1)


def test_pages_through_one_full_bucket(redis_target: RedisTarget) -> None:
    backend = redis_target.lock_backend(LOCK_INDEX_BUCKETS=1)
    names = [f"n:{i:02d}" for i in range(25)]
    grant_many(backend, names)
    seen: list[str] = []
    after = None
    for _ in range(5):
        page = backend.held_locks_page(limit=10, after=after)
        seen += [h.name for h in page.locks]
        after = page.next_after
        if after is None:
            break
    assert seen == names
    exact = backend.held_locks_page(limit=25)
    assert len(exact.locks) == 25 and exact.next_after is None
