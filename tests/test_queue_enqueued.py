"""Each task's enqueue time: written with its payload, deleted with it, never left behind."""

from __future__ import annotations

import time
from typing import Any

from django_redislock.queue import Queue

from .conftest import RedisTarget, make_queue


def stamps(q: Queue) -> dict[str, int]:
    raw: Any = q.backend.client.hgetall(q.enqueued_key)
    return {k.decode(): int(v) for k, v in raw.items()}


def server_micros(q: Queue) -> int:
    seconds, micros = q.backend.client.time()
    return int(seconds) * 1_000_000 + int(micros)


def test_an_enqueue_records_the_time_once_and_a_replace_records_it_again(
    redis_target: RedisTarget,
) -> None:
    q = make_queue(redis_target)
    before = server_micros(q)
    assert q.enqueue("a", 1) and q.enqueue("b", 2, delay=60)
    assert q.enqueue_many([("c", 3), ("d", 4)]) == [True, True]
    first = stamps(q)
    assert sorted(first) == ["a", "b", "c", "d"]
    assert all(before <= at <= server_micros(q) for at in first.values())
    time.sleep(0.01)
    assert q.enqueue("a", 9) is False  # the first copy is kept, and its enqueue time
    assert stamps(q)["a"] == first["a"]
    assert q.enqueue("a", 9, replace=True) is True
    assert stamps(q)["a"] > first["a"]  # a replaced task is queued anew


def test_every_way_out_of_the_queue_deletes_the_time(redis_target: RedisTarget) -> None:
    q = make_queue(redis_target)
    for i in range(6):
        q.enqueue(f"t{i}", i)
    claimed = q.pop(2)  # t0, t1
    assert q.ack(claimed[:1]) == 1  # t0 done
    [dead] = [t for t in claimed if t.id == "t1"]
    assert q.retry(dead, error="boom", max_attempts=1) == "dead"
    assert "t1" in stamps(q)  # a dead letter keeps its payload, and its enqueue time
    assert q.remove("t2")
    top = q.top(1)[0]  # t3
    assert q.dequeue(top.id, top.score)
    assert sorted(stamps(q)) == ["t1", "t4", "t5"]
    q.purge()
    assert not q.backend.client.exists(q.enqueued_key)


def test_a_drained_queue_leaves_no_enqueue_time(redis_target: RedisTarget) -> None:
    q = make_queue(redis_target)
    q.enqueue_many([(f"t{i}", i) for i in range(250)])
    while True:
        claim = q.claim(100)
        if not claim.tasks:
            break
        q.ack(claim.tasks)
    assert not q.backend.client.exists(q.enqueued_key)


def test_the_enqueue_time_shares_the_queues_slot(redis_target: RedisTarget) -> None:
    q: Any = make_queue(redis_target)
    assert q.enqueued_key in q.script_keys
    tag = q.keys[0].split("{", 1)[1].split("}", 1)[0]
    assert "{" + tag + "}" in q.enqueued_key


def test_an_order_task_of_a_take_is_stamped_and_a_restore_deletes_it(
    redis_target: RedisTarget,
) -> None:
    from .test_inventory import make_stock

    stock = make_stock(redis_target)
    stock.set(5)
    take = stock.take(buyer="b1")
    assert take.reservation is not None and stock.queue is not None
    queue = stock.queue
    assert take.reservation.id in stamps(queue)  # taken and queued in one script
    assert stock.restore(take.reservation)
    assert take.reservation.id not in stamps(queue)  # the order task went with its units


def test_get_returns_the_enqueue_time_and_none_when_it_was_not_recorded(
    redis_target: RedisTarget,
) -> None:
    q: Any = make_queue(redis_target)
    assert q.enqueue("a", 1, delay=60)
    task = q.get("a")
    assert task is not None and task.enqueued_at == stamps(q)["a"]
    assert task.enqueued_at < task.score  # queued now, due a minute later
    # another producer writes the payload and the pending entry, no enqueue time
    q.backend.client.hset(q.keys[3], "foreign", b"raw")
    q.backend.client.zadd(q.keys[0], {"foreign": 1})
    foreign = q.get("foreign")
    assert foreign is not None and foreign.enqueued_at is None and foreign.raw_payload == b"raw"


def test_a_resent_replace_does_not_move_the_enqueue_time(redis_target: RedisTarget) -> None:
    from django_redislock.queue.records import Entry

    q: Any = make_queue(redis_target)
    assert q.enqueue("a", 1)
    call = q._enqueue_call([Entry("a", 0, q.serializer.dumps(2))], True)
    assert q._run(call) == [True]
    first = stamps(q)["a"]
    time.sleep(0.01)
    assert q._run(call) == [True]  # the resend answers the first reply from its request key
    assert stamps(q)["a"] == first


def test_a_requeued_dead_letter_keeps_its_enqueue_time_until_it_is_done(
    redis_target: RedisTarget,
) -> None:
    q = make_queue(redis_target)
    q.enqueue("a", 1)
    first = stamps(q)["a"]
    [task] = q.pop(1)
    assert q.retry(task, error="boom", max_attempts=1) == "dead"
    assert q.requeue_dead() == 1
    assert stamps(q) == {"a": first}  # requeued, not enqueued again
    [again] = q.pop(1)
    assert q.ack([again]) == 1
    assert not q.backend.client.exists(q.enqueued_key)
