"""The admin index: listing and counting held locks without KEYS, pruning expired entries."""

from __future__ import annotations

import time
from typing import Any

import pytest

from django_redislock.calls.batch import Batch
from django_redislock.exceptions import InvalidArgument
from django_redislock.locking import index
from django_redislock.locking.keys import BucketKeys
from django_redislock.locking.pipeline import run_scripts

from .conftest import RedisTarget


def grant_many(backend: Any, names: list[str], ttl: float = 30) -> None:
    """Take many mutexes at once through the real acquire script (one pipeline)."""
    calls = []
    for name in names:
        lock = backend.lock(name, ttl=ttl)
        calls.append(lock._attempt(f"owner-{name}", lock.meta("t", None), False, 0))
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
        assert 15 < order.expires_in <= 20 and order.acquired_at is not None  # slack: a stall
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

    for b in range(backend.options["LOCK_INDEX_BUCKETS"]):
        bucket_sizes += redis_target.raw.zcard(BucketKeys.build(backend, b).names)
    assert bucket_sizes == 1


def test_a_page_is_two_pipelines_whatever_the_number_held(
    redis_target: RedisTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = redis_target.lock_backend()
    backend.held_locks()  # loads the script
    sends: list[int] = []
    real_send = Batch._send

    def counting_send(self: Batch, positions: list[int]) -> Any:
        sends.append(len(positions))
        return real_send(self, positions)

    monkeypatch.setattr(Batch, "_send", counting_send)
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
        # One pipeline of one script per bucket for the names, then (when any is held) one
        # pipeline of plain reads for their holders: a round trip each on a single server,
        # one per master each on a cluster (redis-py groups a cluster pipeline by node).
        assert sends == [backend.options["LOCK_INDEX_BUCKETS"]]
        pipelines = 2 if held else 1
        if redis_target.kind == "single":
            assert requests[0] == pipelines
        elif redis_target.kind == "cluster":
            assert pipelines <= requests[0] <= 3 * pipelines  # one request per master


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
    assert [name for page in walk_forward(backend, "", 10) for name in names_of(page)] == names
    exact = backend.held_locks_page(limit=25)
    assert len(exact.locks) == 25 and exact.next_after is None


def walk_forward(backend: Any, prefix: str, limit: int) -> list[Any]:
    """Every page of ``prefix`` from the first, following ``next_after``."""
    pages = [backend.held_locks_page(prefix=prefix, limit=limit)]
    while pages[-1].next_after is not None:
        assert len(pages) < 20, "the forward walk does not end"
        pages.append(
            backend.held_locks_page(prefix=prefix, limit=limit, after=pages[-1].next_after)
        )
    return pages


def walk_backward(backend: Any, limit: int, before: str) -> list[Any]:
    """Every page before the name ``before``, nearest first, following ``previous_before``."""
    pages = [backend.held_locks_page(limit=limit, before=before)]
    while pages[-1].previous_before is not None:
        assert len(pages) < 20, "the backward walk does not end"
        pages.append(backend.held_locks_page(limit=limit, before=pages[-1].previous_before))
    return pages


def names_of(page: Any) -> list[str]:
    return [held.name for held in page.locks]


@pytest.mark.parametrize("prefix", ["", "order:"])
def test_pages_backward_are_the_forward_pages_in_reverse(
    redis_target: RedisTarget, prefix: str
) -> None:
    backend = redis_target.lock_backend()
    assert backend.options["LOCK_INDEX_BUCKETS"] > 1  # the walk merges several buckets
    names = [f"{prefix}{i:02d}" for i in range(25)]
    outside = ["a:below", "zz:above"] if prefix else []  # on both sides of the prefix
    grant_many(backend, names + outside)
    forward = walk_forward(backend, prefix, 10)
    assert [len(p.locks) for p in forward] == [10, 10, 5]
    assert forward[0].previous_before is None  # the first page has nothing before it
    backward = [forward[-1]]
    while backward[-1].previous_before is not None:
        assert len(backward) < 20, "the backward walk does not end"
        cursor = backward[-1].previous_before
        backward.append(backend.held_locks_page(prefix=prefix, limit=10, before=cursor))
    assert [names_of(p) for p in backward] == [names_of(p) for p in reversed(forward)]
    for earlier, later in zip(backward[1:], backward, strict=False):
        assert earlier.next_after == names_of(earlier)[-1]  # the page we came from follows it
        assert later.previous_before == names_of(later)[0]
        assert earlier.total == len(names) + len(outside)
    if prefix:
        assert names_of(backend.held_locks_page(prefix=prefix, before="zz:top")) == names
        assert names_of(backend.held_locks_page(prefix=prefix, limit=3, before="zz")) == names[-3:]
        assert backend.held_locks(prefix=prefix, before="a:") == []


def test_a_backward_page_walks_one_full_bucket(redis_target: RedisTarget) -> None:
    """With one bucket, a backward page is one ZREVRANGEBYLEX walk in the script."""
    backend = redis_target.lock_backend(LOCK_INDEX_BUCKETS=1)
    names = [f"n:{i:02d}" for i in range(25)]
    grant_many(backend, names)
    last = backend.held_locks_page(limit=10, before="n:99")
    assert (names_of(last), last.previous_before, last.next_after) == (
        names[15:],
        "n:15",
        "n:24",
    )
    first = backend.held_locks_page(limit=10, before="n:10")
    assert (names_of(first), first.previous_before) == (names[:10], None)
    assert backend.held_locks_page(limit=25, before="n:99").previous_before is None
    assert backend.held_locks(limit=10, before="n:00") == []


def test_after_and_before_together_are_refused_before_redis(redis_target: RedisTarget) -> None:
    backend = redis_target.lock_backend()
    grant_many(backend, [f"gone:{i}" for i in range(20)], ttl=0.1)
    time.sleep(0.2)  # expired, still in the index: any listing script would prune them

    def indexed() -> int:
        buckets = range(backend.options["LOCK_INDEX_BUCKETS"])
        return sum(redis_target.raw.zcard(BucketKeys.build(backend, b).names) for b in buckets)

    assert indexed() == 20
    with pytest.raises(InvalidArgument, match=r"after .*before"):
        backend.held_locks_page(after="gone:1", before="gone:9")
    with pytest.raises(InvalidArgument, match="before"):
        backend.held_locks(before="")
    with pytest.raises(InvalidArgument, match="before"):
        backend.held_locks(before="a{b}")
    assert indexed() == 20  # nothing reached Redis
    assert backend.held_locks(before="gone:9") == [] and indexed() == 0


def test_pages_behind_more_stale_entries_than_one_call_looks_at(
    redis_target: RedisTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    # After a mass expiry a bucket can hold more stale names than one listing prunes; a page
    # must then stop where its walk gave up, and the next page go on from there, skipping no
    # live lock (small limits here stand for 5,000 pruned and 10,000 looked at).
    monkeypatch.setattr(index, "PRUNE_LIMIT", 5)
    monkeypatch.setattr(index, "SCAN_LIMIT", 40)
    backend = redis_target.lock_backend(LOCK_INDEX_BUCKETS=1)
    live = ["0:first", *[f"b:{i:02d}" for i in range(12)], "z:last"]
    grant_many(backend, live)
    bucket = BucketKeys.build(backend, 0)
    stale = [f"a:{i:03d}" for i in range(150)]  # expired long ago, never pruned
    redis_target.raw.zadd(bucket.names, dict.fromkeys(stale, 0))
    redis_target.raw.zadd(bucket.expiry, dict.fromkeys(stale, 1))

    forward = walk_forward(backend, "", 5)
    assert [name for page in forward for name in names_of(page)] == sorted(live)

    redis_target.raw.zadd(bucket.names, dict.fromkeys(stale, 0))  # stale again, all of them
    redis_target.raw.zadd(bucket.expiry, dict.fromkeys(stale, 1))
    backward = walk_backward(backend, 5, "zz")
    assert [name for page in reversed(backward) for name in names_of(page)] == sorted(live)
