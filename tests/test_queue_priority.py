"""Priority levels: highest first, FIFO within a level, delays honoured, one entry per id.

Every test runs on fakeredis, the single server and the cluster (``redis_target``).
"""

from __future__ import annotations

import asyncio
import time

import pytest

from django_redislock.exceptions import InvalidArgument
from django_redislock.queue import DEAD, DELAYED, IN_FLIGHT, READY, Queue
from django_redislock.queue.priority import from_django

from .conftest import RedisTarget, make_queue


def claimed(q: Queue, count: int = 100) -> list[str]:
    """Claim up to ``count`` due tasks one by one (each claim takes the best one)."""
    ids = []
    for _ in range(count):  # bounded
        tasks = q.pop(1)
        if not tasks:
            break
        ids.append(tasks[0].id)
        q.ack(tasks[0])
    return ids


def test_highest_level_first_fifo_within_a_level(redis_target: RedisTarget) -> None:
    q = make_queue(redis_target)
    plan = [("a0", 0), ("b5", 5), ("c9", 9), ("d0", 0), ("e5", 5), ("f1", 1), ("g9", 9)]
    for id, level in plan:
        assert q.enqueue(id, id, priority=level)
    assert claimed(q) == ["c9", "g9", "b5", "e5", "f1", "a0", "d0"]
    assert q.stats()["ready"] == 0


def test_one_claim_takes_levels_in_order_then_the_default_level(
    redis_target: RedisTarget,
) -> None:
    q = make_queue(redis_target)
    q.enqueue_many([(f"low{i}", i) for i in range(3)])
    q.enqueue_many([(f"mid{i}", i) for i in range(3)], priority=4)
    q.enqueue_many([(f"top{i}", i) for i in range(2)], priority=8)
    tasks = q.pop(5)
    assert [t.id for t in tasks] == ["top0", "top1", "mid0", "mid1", "mid2"]
    assert [t.priority for t in tasks] == [8, 8, 4, 4, 4]
    rest = q.pop(10)
    assert [t.id for t in rest] == ["low0", "low1", "low2"]
    assert [t.priority for t in rest] == [0, 0, 0]
    assert q.pop(10) == []


def test_a_delayed_high_priority_task_waits_for_its_time(redis_target: RedisTarget) -> None:
    q = make_queue(redis_target)
    q.enqueue("later9", 1, delay=0.6, priority=9)
    q.enqueue("now0", 1)
    q.enqueue("now3", 1, priority=3)
    assert [t.id for t in q.pop(5)] == ["now3", "now0"]
    assert q.get("later9").state == DELAYED  # type: ignore[union-attr]
    deadline = time.monotonic() + 10
    tasks = q.pop(5)
    while not tasks and time.monotonic() < deadline:
        time.sleep(0.05)
        tasks = q.pop(5)
    assert [(t.id, t.priority) for t in tasks] == [("later9", 9)]


def test_every_reader_sees_each_task_once(redis_target: RedisTarget) -> None:
    q = make_queue(redis_target)
    q.enqueue("a", 1)
    q.enqueue("b", 2, priority=7)
    q.enqueue("c", 3, priority=2, delay=60)
    stats = q.stats()
    assert (stats["ready"], stats["delayed"]) == (2, 1)
    assert [t.id for t in q.top(5)] == ["a", "b"]  # top stays in due order
    assert sorted(t.id for t in q.tasks(READY)) == ["a", "b"]
    assert [t.id for t in q.tasks(DELAYED)] == ["c"]
    got = q.get("b")
    assert got is not None and got.priority == 7 and got.state == READY
    assert q.get("a").priority == 0  # type: ignore[union-attr]


def test_dedup_keeps_the_first_copy_and_its_level(redis_target: RedisTarget) -> None:
    q = make_queue(redis_target)
    assert q.enqueue("x", 1, priority=2)
    assert not q.enqueue("x", 2, priority=9)
    q.enqueue("y", 1, priority=5)
    assert [t.id for t in q.pop(5)] == ["y", "x"]


def test_replace_changes_the_level_both_ways(redis_target: RedisTarget) -> None:
    q = make_queue(redis_target)
    q.enqueue("first", 1)
    q.enqueue("x", 1, priority=9)
    q.enqueue("y", 1)
    assert q.enqueue("x", 2, replace=True)  # back to the default level: after "first"
    assert q.enqueue("y", 2, replace=True, priority=6)
    assert q.get("x").priority == 0  # type: ignore[union-attr]
    tasks = q.pop(5)
    assert [t.id for t in tasks] == ["y", "first", "x"]
    # replacing a running task queues a fresh copy at the new level
    assert q.enqueue("first", 3, replace=True, priority=4)
    q.enqueue("z", 1, priority=3)
    assert [t.id for t in q.pop(5)] == ["first", "z"]


def test_remove_dequeue_and_purge_leave_no_priority_data(redis_target: RedisTarget) -> None:
    q = make_queue(redis_target)
    raw = redis_target.raw
    prio_key, levels_key = q.priority_keys
    q.enqueue_many([(f"t{i}", i) for i in range(5)], priority=3)
    assert raw.zcard(prio_key) == 5 and raw.hlen(levels_key) == 5
    assert q.remove("t0")
    assert q.dequeue("t1", q.get("t1").score)  # type: ignore[union-attr]
    assert raw.zcard(prio_key) == 3 and raw.hlen(levels_key) == 3
    # an id removed and queued again at the default level has no level left over
    q.enqueue("t0", 0)
    q.enqueue("d", 0)
    assert [t.id for t in q.pop(10)] == ["t2", "t3", "t4", "t0", "d"]
    q.enqueue("w", 1, priority=9)
    assert q.purge() == 6
    assert not raw.exists(prio_key) and not raw.exists(levels_key)


def test_ack_forgets_the_level(redis_target: RedisTarget) -> None:
    q = make_queue(redis_target)
    levels_key = q.priority_keys[1]
    q.enqueue("a", 1, priority=5)
    [task] = q.pop(1)
    assert q.ack(task) == 1
    assert not redis_target.raw.exists(levels_key)
    q.enqueue("a", 1)  # the same id again, at the default level
    assert q.get("a").priority == 0  # type: ignore[union-attr]


def test_retry_release_and_requeue_dead_keep_the_level(redis_target: RedisTarget) -> None:
    q = make_queue(redis_target)
    q.enqueue("hi", 1, priority=8)
    [task] = q.pop(1)
    assert q.retry(task, delay=0, error="boom", max_attempts=3) == "retried"
    q.enqueue("lo", 1)
    [again] = q.pop(1)
    assert (again.id, again.priority) == ("hi", 8)
    assert q.release([again]) == 1
    [third] = q.pop(1)
    assert third.id == "hi"
    assert q.retry(third, error="boom", max_attempts=1) == "dead"
    assert q.get("hi").state == DEAD  # type: ignore[union-attr]
    assert q.requeue_dead() == 1
    q.enqueue("lo2", 1)
    assert [t.id for t in q.pop(5)] == ["hi", "lo", "lo2"]


def test_an_expired_lease_comes_back_at_its_level(redis_target: RedisTarget) -> None:
    q = make_queue(redis_target)
    q.enqueue("hi", 1, priority=6)
    assert len(q.pop(1, lease=0.2)) == 1
    q.enqueue("lo", 1)
    time.sleep(0.3)
    deadline = time.monotonic() + 10
    tasks = q.pop(5)
    while not tasks and time.monotonic() < deadline:  # bounded
        time.sleep(0.05)
        tasks = q.pop(5)
    assert [t.id for t in tasks] == ["hi", "lo"]
    assert tasks[0].suspect and tasks[0].priority == 6
    assert q.get("hi").state == IN_FLIGHT  # type: ignore[union-attr]


def test_admin_style_changes_are_repaired_at_claim(redis_target: RedisTarget) -> None:
    """A prioritized task whose pending entry moved or vanished outside the scripts that
    keep the index (a hand-edited zset) is still claimed once, or not at all."""
    q = make_queue(redis_target)
    raw = redis_target.raw
    pending = q.keys[0]
    q.enqueue("moved", 1, priority=5, delay=3600)
    q.enqueue("gone", 1, priority=5)
    q.enqueue("plain", 1)
    raw.zadd(pending, {"moved": 1})  # due long ago, its index entry still says in an hour
    raw.zrem(pending, "gone")
    ids = [t.id for t in q.pop(10)]
    assert sorted(ids) == ["moved", "plain"]
    assert q.pop(10) == []


def test_async_twins_take_a_priority(redis_target: RedisTarget) -> None:
    q = make_queue(redis_target)

    async def scenario() -> None:
        assert await q.enqueue_async("a", 1)
        assert await q.enqueue_async("b", 1, priority=2)
        assert await q.enqueue_many_async([("c", 1), ("d", 1)], priority=3) == [True, True]

    asyncio.run(scenario())
    assert [(t.id, t.priority) for t in q.pop(10)] == [("c", 3), ("d", 3), ("b", 2), ("a", 0)]


@pytest.mark.parametrize("bad", [-1, 10, 2.0, "5", True, None])
def test_a_bad_priority_names_the_argument_and_writes_nothing(
    redis_target: RedisTarget, bad: object
) -> None:
    q = make_queue(redis_target)
    q.enqueue("keep", 1, priority=3)
    before = {key: redis_target.raw.dump(key) for key in q.script_keys}
    calls = [
        lambda: q.enqueue("x", 1, priority=bad),  # type: ignore[arg-type]
        lambda: q.enqueue_many([("x", 1), ("y", 2)], priority=bad),  # type: ignore[arg-type]
        lambda: asyncio.run(q.enqueue_async("x", 1, priority=bad)),  # type: ignore[arg-type]
        lambda: asyncio.run(q.enqueue_many_async([("x", 1)], priority=bad)),  # type: ignore[arg-type]
    ]
    for call in calls:
        with pytest.raises(InvalidArgument, match="priority"):
            call()
    assert {key: redis_target.raw.dump(key) for key in q.script_keys} == before


def test_django_priorities_map_onto_levels() -> None:
    assert [from_django(p) for p in (-100, -1, 0, 1, 11, 12, 50, 88, 89, 100)] == [
        0,
        0,
        0,
        1,
        1,
        2,
        5,
        8,
        9,
        9,
    ]


def test_listings_carry_the_level(redis_target: RedisTarget) -> None:
    q = make_queue(redis_target)
    q.enqueue("a", 1)
    q.enqueue("b", 1, priority=4)
    q.enqueue("c", 1, priority=9, delay=60)
    assert {t.id: t.priority for t in q.tasks(READY)} == {"a": 0, "b": 4}
    assert [(t.id, t.priority) for t in q.tasks(DELAYED)] == [("c", 9)]
    [task] = q.pop(1)
    assert [(t.id, t.priority) for t in q.tasks(IN_FLIGHT)] == [("b", 4)]
    q.retry(task, error="x", max_attempts=1)
    assert [(t.id, t.priority) for t in q.tasks(DEAD)] == [("b", 4)]


def test_admin_run_now_and_requeue_keep_the_level(redis_target: RedisTarget) -> None:
    from django_redislock.admin import data, search

    q = make_queue(redis_target)
    q.enqueue("plain", 1)
    q.enqueue("later", 1, priority=5, delay=3600)
    later = q.get("later")
    assert later is not None
    assert data.act(q, "run", [("later", 1, later.score)]) == [1]
    row = search.find_task(q, "later")
    assert row is not None and row.priority == 5 and row.state == READY
    [task] = q.pop(1)
    assert task.id == "later"  # run now: ahead of the older default-level task
    q.retry(task, error="x", max_attempts=1)
    assert data.act(q, "requeue", [("later", 3, q.get("later").score)]) == [1]  # type: ignore[union-attr]
    assert [t.id for t in q.pop(5)] == ["later", "plain"]
    q.enqueue("gone", 1, priority=2)
    assert data.act(q, "delete", [("gone", 1, q.get("gone").score)]) == [1]  # type: ignore[union-attr]
    assert redis_target.raw.zscore(q.priority_keys[0], "gone") is None
    assert redis_target.raw.hget(q.priority_keys[1], "gone") is None
