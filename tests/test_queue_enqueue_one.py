"""``Queue.send_one``: the enqueue of ``delay()``, a script of its own with six keys.

It must write exactly what ``queue_enqueue.lua``'s one-task path writes (the same entries,
the same enqueue time and score, the same rate counts), keep a copy that is queued or in
flight, and hand the ids it does not handle (an orphan payload field, a dead task) to the
general script, having written nothing itself.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.test import override_settings

from django_redislock import queues
from django_redislock.queue import DEAD, IN_FLIGHT, READY, Queue
from django_redislock.queue.rates import read

from .conftest import RedisTarget, make_queue
from .test_queue_footprint import ONE_ENQUEUE, commands_since_reset
from .testapp import tasks

DATA = b'{"task":"t","args":[1],"kwargs":{}}'


def entry(q: Queue, id: str) -> tuple[Any, ...]:
    """What the queue holds for ``id``: its state, payload, and score == enqueue time."""
    raw: Any = q.backend.client
    task = q.get(id)
    assert task is not None
    stamp = raw.hget(q.enqueued_key, id)
    return task.state, raw.hget(q.keys[3], id), int(stamp) == task.score


def test_it_writes_what_the_general_enqueue_writes(redis_target: RedisTarget) -> None:
    q = make_queue(redis_target)
    assert q.send_one("one", DATA) == 1
    assert q.enqueue("general", {"task": "t", "args": [1], "kwargs": {}})
    assert entry(q, "one") == entry(q, "general") == (READY, DATA, True)
    assert q.backend.client.llen(q.signal_key) == 1
    trend = read(q)
    assert trend.total("enqueued") == 2 and sum(trend.seconds["enqueued"]) == 2
    assert [task.id for task in q.claim(5).tasks] == ["one", "general"]


def test_a_copy_queued_or_in_flight_is_kept(redis_target: RedisTarget) -> None:
    q = make_queue(redis_target)
    assert q.enqueue("a", "first")
    assert q.send_one("a", DATA) == 0
    [task] = q.claim(1).tasks
    assert q.send_one("a", DATA) == 0
    got = q.get("a")
    assert got is not None and (got.state, got.payload) == (IN_FLIGHT, "first")
    assert read(q).total("enqueued") == 1  # a kept copy is not counted
    assert q.ack(task) == 1


def test_an_orphan_field_and_a_dead_task_go_to_the_general_script(
    redis_target: RedisTarget,
) -> None:
    q = make_queue(redis_target, MAX_ATTEMPTS=1)
    raw: Any = q.backend.client
    raw.hset(q.keys[3], "orphan", b"stale")  # a payload field in no zset
    assert q.send_one("orphan", DATA) == 1
    assert entry(q, "orphan") == (READY, DATA, True)
    [task] = q.claim(1).tasks
    assert q.retry(task, error="boom") == "dead"
    assert q.get("orphan").state == DEAD  # type: ignore[union-attr]
    assert q.send_one("orphan", DATA) == 1  # revived, as an enqueue revives a dead id
    assert entry(q, "orphan") == (READY, DATA, True)
    assert q.stats()["dead"] == 0


def test_a_slot_of_an_older_bucket_is_cleared_not_added_to(single_target: RedisTarget) -> None:
    q = make_queue(single_target)
    raw: Any = q.backend.client
    for attempt in range(5):  # the server's second must not change between seeding and send
        raw.delete(q.rates_key)
        now_s = int(raw.time()[0])
        minute = now_s // 60
        m, s = f"m{minute % 60}", f"s{now_s % 180}"
        raw.hset(
            q.rates_key,
            mapping={m: minute - 60, f"{m}:enqueued": 5, s: now_s - 180, f"{s}:enqueued": 7},
        )
        assert q.send_one(f"a{attempt}", DATA) == 1
        if int(raw.time()[0]) == now_s:
            break
    fields = {k.decode(): v.decode() for k, v in raw.hgetall(q.rates_key).items()}
    assert fields[m] == str(minute) and fields[f"{m}:enqueued"] == "1"
    assert fields[s] == str(now_s) and fields[f"{s}:enqueued"] == "1"


def test_a_foreign_key_at_the_rates_name_fails_nothing(redis_target: RedisTarget) -> None:
    q = make_queue(redis_target)
    raw: Any = q.backend.client
    raw.set(q.rates_key, "another program's string")
    assert q.send_one("a", DATA) == 1
    assert raw.get(q.rates_key) == b"another program's string"
    assert q.stats()["ready"] == 1


@pytest.mark.parametrize("direct", [True, False])
def test_a_server_that_forgot_the_script_runs_the_call_once(
    single_target: RedisTarget, direct: bool
) -> None:
    q = make_queue(single_target, DIRECT_SENDER=direct)
    assert q.send_one("warm", DATA) == 1
    single_target.raw.script_flush()
    assert q.send_one("after", DATA) == 1
    assert q.send_one("after", DATA) == 0
    assert read(q).total("enqueued") == 2


def test_delay_is_one_script_of_the_same_eight_commands(single_target: RedisTarget) -> None:
    params = {**single_target.params(COMMIT_MODE="immediate"), "KEY_PREFIX": "test"}
    raw: Any = single_target.raw
    with override_settings(REDISLOCK_QUEUES={"default": params}):
        assert tasks.remember.delay("warm").queued
        raw.config_resetstat()
        handle = tasks.remember.delay("one", at=1)
        calls = commands_since_reset(raw)
        q = queues["default"].queue("tests")
        assert handle.queued is True and entry(q, handle)[0] == READY
        assert q.get(handle).payload == {  # type: ignore[union-attr]
            "task": "tests.testapp.tasks.remember",
            "args": ["one"],
            "kwargs": {"at": 1},
        }
    assert calls == ONE_ENQUEUE, calls
