"""Seed 000's queue semantics on fakeredis, a real server and a real cluster."""

from __future__ import annotations

import asyncio
import datetime
import decimal
import re
import time
import uuid
from collections.abc import Callable
from typing import TypeVar

import pytest

from django_redislock.exceptions import InvalidArgument
from django_redislock.queue import DEAD, DELAYED, IN_FLIGHT, READY, Queue

from .conftest import RedisTarget, make_queue

T = TypeVar("T")


def test_enqueue_dedup_keeps_the_first(redis_target: RedisTarget) -> None:
    q = make_queue(redis_target)
    assert q.enqueue("order-42", {"v": 1}) is True
    assert q.enqueue("order-42", {"v": 2}) is False
    [task] = q.top(10)
    assert (task.id, task.payload, task.state) == ("order-42", {"v": 1}, READY)


def test_replace_reschedules(redis_target: RedisTarget) -> None:
    q = make_queue(redis_target)
    q.enqueue("a", 1)
    [before] = q.top()
    assert q.enqueue("a", 2, delay=60, replace=True) is True
    assert q.top() == []
    [task] = q.tasks(DELAYED)
    assert task.payload == 2 and task.score > before.score + 59_000_000


def poll(fetch: Callable[[], T], done: Callable[[T], bool], seconds: float = 5.0) -> T:
    """Call ``fetch`` every 20 ms until ``done`` accepts its value or ``seconds`` pass."""
    deadline = time.monotonic() + seconds
    value = fetch()
    while not done(value) and time.monotonic() < deadline:
        time.sleep(0.02)
        value = fetch()
    return value


def test_delay_ordering_and_top_does_not_remove(redis_target: RedisTarget) -> None:
    # Whole seconds between the due times: "second" must not be due at the first top(), and
    # "late" must still be delayed once "second" is due, even on a loaded CI machine.
    q = make_queue(redis_target)
    q.enqueue("late", delay=2.0)
    q.enqueue("second", delay=1.0)
    q.enqueue("first")
    assert [t.id for t in q.top(10)] == ["first"]
    assert [t.id for t in q.top(10)] == ["first"]
    ready = poll(lambda: [t.id for t in q.top(10)], lambda ids: ids != ["first"])
    assert ready == ["first", "second"]
    stats = q.stats()
    assert (stats["ready"], stats["delayed"], stats["in_flight"]) == (2, 1, 0)
    assert [t.id for t in q.pop(10)] == ["first", "second"]
    assert q.pop(10) == []
    assert [t.id for t in poll(lambda: q.pop(10), bool)] == ["late"]


def test_fifo_within_a_batch(redis_target: RedisTarget) -> None:
    q = make_queue(redis_target)
    ids = [f"t{i}" for i in range(50)][::-1]
    assert q.enqueue_many([(i, None) for i in ids]) == [True] * 50
    assert [t.id for t in q.top(50)] == ids


def test_dequeue_compares_the_score(redis_target: RedisTarget) -> None:
    q = make_queue(redis_target)
    q.enqueue("a")
    [task] = q.top()
    assert q.dequeue("a", task.score + 1) is False
    assert q.dequeue("a", task.score) is True
    assert q.dequeue("a", task.score) is False
    q.enqueue("b")
    [old] = q.top()
    q.enqueue("b", delay=5, replace=True)
    assert q.dequeue("b", old.score) is False
    assert q.get("b") is not None


def test_pop_moves_to_in_flight_and_ack_finishes(redis_target: RedisTarget) -> None:
    q = make_queue(redis_target)
    q.enqueue_many([("a", 1), ("b", 2), ("c", 3)])
    tasks = q.pop(2, lease=30)
    assert [(t.id, t.payload, t.attempts, t.state) for t in tasks] == [
        ("a", 1, 1, IN_FLIGHT),
        ("b", 2, 1, IN_FLIGHT),
    ]
    assert tasks[0].lease_deadline is not None
    assert tasks[0].lease_deadline - tasks[0].score >= 29_000_000
    assert q.enqueue("a") is False  # in flight still counts as queued
    assert q.stats()["in_flight"] == 2
    assert q.ack(tasks) == 2
    assert q.ack(tasks) == 0
    assert q.get("a") is None
    assert redis_target.raw.hget(q.keys[3], "a") is None
    assert q.enqueue("a") is True


def test_get_and_states(redis_target: RedisTarget) -> None:
    q = make_queue(redis_target)
    q.enqueue("r")
    q.enqueue("d", delay=60)
    assert q.get("r").state == READY  # type: ignore[union-attr]
    assert q.get("d").state == DELAYED  # type: ignore[union-attr]
    [claimed] = q.pop()
    got = q.get("r")
    assert got is not None and got.state == IN_FLIGHT and got.lease_deadline
    assert q.get("missing") is None
    assert q.retry(claimed, error="boom", max_attempts=1) == "dead"
    dead = q.get("r")
    assert dead is not None and (dead.state, dead.last_error) == (DEAD, "boom")


def test_a_claim_returns_each_field_of_a_retried_task(redis_target: RedisTarget) -> None:
    """A claim packs score, attempts and last error in one string: each comes back whole."""
    q = make_queue(redis_target)
    q.enqueue("t", {"x": "caf\u00e9"})
    [first] = q.pop()
    error = "KeyError: 'a:b'\nTraceback: line 1: in f\u00e9"  # colons, a newline, non-ASCII
    assert q.retry(first, error=error, delay=0) == "retried"
    queued = q.get("t")
    assert queued is not None
    [again] = q.claim(1).tasks
    assert (again.id, again.payload, again.attempts) == ("t", {"x": "caf\u00e9"}, 2)
    assert (again.last_error, again.score, again.state) == (error, queued.score, IN_FLIGHT)


def test_a_batch_claim_returns_every_task_whole(redis_target: RedisTarget) -> None:
    """A claim sends its tasks as two strings (sizes, then bytes): each task comes back whole,
    whatever its id, payload and error hold, in a first answer and in a resent one."""
    q = make_queue(redis_target, SERIALIZER="pickle")
    payloads = {
        "plain": 1,
        "caf\u00e9,1,2": b"\x00,\xff:,\r\n",  # an id with commas; binary bytes in the payload
        "empty": "",
        "long": "x," * 5000,
        "none": None,
    }
    q.enqueue_many(list(payloads.items()))
    errors = {"plain": "", "caf\u00e9,1,2": "E,1,2:3\n\u00e9", "long": "boom", "none": ","}
    for task in q.pop(10):
        assert q.retry(task, error=errors.get(task.id, ""), delay=0) == "retried"
    client = redis_target.raw
    client.hset(q.script_keys[5], "empty", b"\xff,bad")  # the last-error hash: not UTF-8
    call = q._claim_call(10, None, [], False)
    first = q._run(call)
    again = q._run(call)  # a resend of the same request answers the same tasks
    for claim in (first, again):
        got = {t.id: (t.payload, t.last_error, t.attempts, t.state) for t in claim.tasks}
        expected = {
            id: (payload, errors.get(id, "\ufffd,bad"), 2, IN_FLIGHT)
            for id, payload in payloads.items()
        }
        assert got == expected
    assert [t.claim for t in again.tasks] == [t.claim for t in first.tasks]
    assert len({t.claim for t in first.tasks}) == len(payloads)


def test_json_payloads_use_djangos_encoder(redis_target: RedisTarget) -> None:
    q = make_queue(redis_target)
    uid = uuid.UUID(int=5)
    q.enqueue("a", {"d": datetime.date(2026, 1, 2), "n": decimal.Decimal("1.50"), "u": uid})
    [task] = q.pop()
    assert task.payload == {"d": "2026-01-02", "n": "1.50", "u": str(uid)}


def test_pickle_round_trips_when_asked(redis_target: RedisTarget) -> None:
    q = make_queue(redis_target, SERIALIZER="pickle")
    q.enqueue("a", {"d": datetime.date(2026, 1, 2), "s": {1, 2}})
    [task] = q.pop()
    assert task.payload == {"d": datetime.date(2026, 1, 2), "s": {1, 2}}


def test_remove_purge_and_registry(redis_target: RedisTarget) -> None:
    backend = redis_target.queue_backend()
    q = backend.queue("big")
    q.enqueue_many([(f"t{i}", i) for i in range(2500)], batch_size=700)
    q.pop(10)
    [dead] = q.pop(1)
    q.retry(dead, max_attempts=1)
    assert backend.queue_names() == ["big"]
    assert q.remove("t100") is True
    assert q.remove("t100") is False
    assert q.purge(chunk=400) == 2499
    stats = q.stats()
    assert (stats["ready"], stats["in_flight"], stats["dead"]) == (0, 0, 0)
    assert [k for k in q.keys if redis_target.raw.exists(k)] == []


def test_async_twins(redis_target: RedisTarget) -> None:
    q = make_queue(redis_target)

    async def scenario() -> list[object]:
        out: list[object] = [await q.enqueue_async("a", 1), await q.enqueue_async("a", 2)]
        out.append(await q.enqueue_many_async([("b", 2), ("c", 3)]))
        out.append([t.id for t in await q.top_async(5)])
        tasks = await q.pop_async(2)
        out.append(await q.ack_async(tasks[0]))
        out.append(await q.retry_async(tasks[1], delay=0, error="x"))
        out.append(await q.extend_lease_async(tasks[1]))
        out.append((await q.stats_async())["ready"])
        out.append(await q.remove_async("c"))
        out.append(await q.get_async("c"))
        out.append([t.id for t in await q.tasks_async("ready")])
        await q.purge_async()
        return out

    assert asyncio.run(scenario()) == [
        True,
        False,
        [True, True],
        ["a", "b", "c"],
        1,
        "retried",
        False,
        2,
        True,
        None,
        ["b"],  # retried with no delay (c was removed)
    ]


def snapshot(target: RedisTarget, q: Queue) -> dict[str, object]:
    """Everything the queue's keys and the alias's name registry hold."""
    raw = target.raw
    state: dict[str, object] = {"names": sorted(raw.smembers(q.backend.names_key))}
    for key in q.keys:
        kind = raw.type(key)
        if kind == b"zset":
            state[key] = raw.zrange(key, 0, -1, withscores=True)
        elif kind == b"hash":
            state[key] = raw.hgetall(key)
        elif kind == b"list":
            state[key] = raw.lrange(key, 0, -1)
    return state


BAD_CALLS = [
    ("id", lambda q: q.enqueue("", 1)),
    ("id", lambda q: q.enqueue(42, 1)),
    ("id", lambda q: q.enqueue(b"bytes", 1)),
    ("delay", lambda q: q.enqueue("x", 1, delay=-1)),
    ("delay", lambda q: q.enqueue("x", 1, delay=float("nan"))),
    ("delay", lambda q: q.enqueue("x", 1, delay="5")),
    ("payload", lambda q: q.enqueue("x", {"f": object()})),
    ("payload", lambda q: q.enqueue("x", float("inf"))),
    ("MAX_PAYLOAD_BYTES", lambda q: q.enqueue("x", "y" * 2000)),
    ("items[2]", lambda q: q.enqueue_many([("a", 1), ("b", 2), ("", 3)])),
    ("payload", lambda q: q.enqueue_many([("a", 1), ("b", object())])),
    ("items[1]", lambda q: q.enqueue_many([("a", 1), "b"])),
    ("count", lambda q: q.pop(0)),
    ("count", lambda q: q.top(-1)),
    ("lease", lambda q: q.pop(1, lease=0)),
    ("lease", lambda q: q.pop(1, lease=-5)),
    ("task", lambda q: q.ack(123)),
    ("task[0]", lambda q: q.ack([""])),
    ("score", lambda q: q.dequeue("a", "1")),
    ("task", lambda q: q.retry("a")),
    ("max_attempts", lambda q: q.retry(q.get("a"), max_attempts=0)),
    ("state", lambda q: q.tasks("running")),
    ("after", lambda q: q.tasks(READY, after=12345)),
    ("ids", lambda q: q.requeue_dead("abc")),
    ("chunk", lambda q: q.purge(0)),
]


def test_task_pages_keep_tasks_that_share_a_score(redis_target: RedisTarget) -> None:
    """requeue_dead() gives a whole batch one score: paging must neither skip nor repeat."""
    q = make_queue(redis_target)
    ids = [f"t{i:02d}" for i in range(7)]
    q.enqueue_many([(i, i) for i in ids])
    for task in q.pop(7):
        q.retry(task, error="boom", max_attempts=1)
    assert q.requeue_dead() == 7
    seen: list[str] = []
    page = q.tasks(READY, count=3)
    for _ in range(5):  # bounded: 7 tasks in pages of 3
        seen += [task.id for task in page]
        if not page:
            break
        page = q.tasks(READY, count=3, after=page[-1])
    assert sorted(seen) == ids
    assert len(seen) == len(set(seen))
    everything = q.tasks(READY, count=10)
    assert len({task.score for task in everything}) < 7  # the scores really tie
    pair = (everything[3].score, everything[3].id)  # a (score, id) cursor works like a task
    assert [t.id for t in q.tasks(READY, count=10, after=pair)] == [t.id for t in everything[4:]]


@pytest.mark.parametrize(("argument", "call"), BAD_CALLS)
def test_bad_input_names_the_argument_and_writes_nothing(
    redis_target: RedisTarget, argument: str, call: object
) -> None:
    q = make_queue(redis_target, MAX_PAYLOAD_BYTES=1000)
    q.enqueue("a", 1)
    before = snapshot(redis_target, q)
    with pytest.raises(InvalidArgument, match=re.escape(argument)):
        call(q)  # type: ignore[operator]
    assert snapshot(redis_target, q) == before


@pytest.mark.parametrize("name", ["", "a{b}", "x" * 600, 5])
def test_bad_queue_names(redis_target: RedisTarget, name: object) -> None:
    backend = redis_target.queue_backend()
    with pytest.raises(InvalidArgument, match="name"):
        backend.queue(name)  # type: ignore[arg-type]


def test_unreachable_server_names_the_setting() -> None:
    from django_redislock.backends.redis import RedisQueueBackend
    from django_redislock.exceptions import ConnectionFailed

    backend = RedisQueueBackend(
        "down", {"LOCATION": "redis://127.0.0.1:1/0", "OPTIONS": {"SOCKET_CONNECT_TIMEOUT": 0.2}}
    )
    q = backend.queue("jobs")
    with pytest.raises(ConnectionFailed, match=r"REDISLOCK_QUEUES\['down'\]"):
        q.pop()
    with pytest.raises(ConnectionFailed, match="LOCATION"):
        asyncio.run(q.stats_async())


def test_an_orphan_payload_field_does_not_block_an_enqueue(redis_target: RedisTarget) -> None:
    q = make_queue(redis_target)
    redis_target.raw.hset(q.keys[3], "ghost", b'"stale"')
    assert q.enqueue("ghost", "fresh") is True
    [task] = q.pop()
    assert task.payload == "fresh"


def test_a_dead_task_enqueued_again_starts_afresh(redis_target: RedisTarget) -> None:
    q = make_queue(redis_target, MAX_ATTEMPTS=1)
    q.enqueue("a", 1)
    [task] = q.pop()
    assert q.retry(task, error="boom") == "dead"
    assert q.enqueue("a", 2) is True
    [again] = q.pop()
    assert (again.payload, again.attempts, again.last_error) == (2, 1, "")
    assert q.stats()["dead"] == 0


def test_the_largest_batches_fit_in_one_script(redis_target: RedisTarget) -> None:
    q = make_queue(redis_target)
    q.enqueue_many([(f"t{i}", None) for i in range(5000)], batch_size=5000)
    claimed = q.pop(5000)
    assert len(claimed) == 5000 and {t.attempts for t in claimed} == {1}
    assert q.claim(0, ack=[t.id for t in claimed]).acked == 5000
    assert q.stats()["in_flight"] == 0 and not redis_target.raw.exists(q.keys[3])


def test_scripts_flushed_from_the_server_are_loaded_again(redis_target: RedisTarget) -> None:
    q = make_queue(redis_target)
    q.enqueue("a")
    redis_target.raw.script_flush()
    assert q.enqueue("b") is True
    assert [t.id for t in q.pop(5)] == ["a", "b"]
