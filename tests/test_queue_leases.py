"""Leases, crash recovery inside pop, retries with backoff and dead letters."""

from __future__ import annotations

import time

import pytest

from django_redislock.queue import DEAD, READY, Claim, Queue
from django_redislock.queue.records import micros

from .conftest import RedisTarget, make_queue


def claims_until_claimed(q: Queue, lease: float = 5) -> list[Claim]:
    """Claim (one task) every 20 ms until a claim returns a task; at most ~5 s of claims."""
    claims = [q.claim(1, lease)]
    for _ in range(250):
        if claims[-1].tasks:
            break
        time.sleep(0.02)
        claims.append(q.claim(1, lease))
    assert claims[-1].tasks, "nothing was handed out within ~5 s"
    return claims


def test_expired_lease_is_handed_out_again(redis_target: RedisTarget) -> None:
    q = make_queue(redis_target)
    q.enqueue("a", {"n": 1})
    [first] = q.pop(lease=0.5)
    assert first.lease_deadline is not None
    claims = claims_until_claimed(q)
    # Each claim reports the server time it ran at, so this holds however slow the machine:
    # the claims before the lease deadline got nothing, the first one after it got the task.
    assert [bool(c.tasks) for c in claims] == [c.now >= first.lease_deadline for c in claims]
    [again] = claims[-1].tasks
    assert (again.id, again.payload, again.attempts) == ("a", {"n": 1}, 2)
    assert "lease expired during attempt 1" in again.last_error
    assert first.id == again.id


def test_acked_task_never_returns(redis_target: RedisTarget) -> None:
    q = make_queue(redis_target)
    q.enqueue("a")
    [task] = q.pop(lease=0.1)
    assert q.ack(task) == 1
    time.sleep(0.15)
    assert q.pop(5) == []
    assert q.stats()["in_flight"] == 0 and q.get("a") is None


def test_extend_lease_keeps_the_task(redis_target: RedisTarget) -> None:
    q = make_queue(redis_target)
    q.enqueue("a")
    [task] = q.pop(lease=0.5)
    old = task.lease_deadline
    assert q.extend_lease(task, lease=5) is True
    assert task.lease_deadline is not None and old is not None and task.lease_deadline > old
    time.sleep(0.6)
    assert q.pop() == []
    q.ack(task)
    assert q.extend_lease(task) is False


def test_leases_that_keep_expiring_end_in_dead_letters(redis_target: RedisTarget) -> None:
    q = make_queue(redis_target, MAX_ATTEMPTS=2)
    q.enqueue("poison")
    for attempt in (1, 2):
        [task] = q.pop(lease=0.05)
        assert task.attempts == attempt
        time.sleep(0.07)
    assert q.pop() == []
    dead = q.get("poison")
    assert dead is not None and dead.state == DEAD
    assert "lease expired during attempt 2" in dead.last_error


def test_recovery_work_per_pop_is_bounded(redis_target: RedisTarget) -> None:
    q = make_queue(redis_target, RECOVERY_BATCH=2)
    q.enqueue_many([(f"t{i}", i) for i in range(5)])
    q.pop(5, lease=0.05)
    time.sleep(0.07)
    claim = q.claim(0)
    assert claim.recovered == 2
    assert q.stats()["ready"] == 2
    assert q.claim(0).recovered == 2
    assert q.claim(0).recovered == 1


def test_retry_backoff_then_dead_letter_then_requeue(redis_target: RedisTarget) -> None:
    q = make_queue(redis_target, MAX_ATTEMPTS=3, RETRY_BACKOFF=0.05, RETRY_JITTER=False)
    q.enqueue("flaky", "p")
    [task] = q.pop(lease=30)
    for attempt in (1, 2):
        assert task.attempts == attempt and task.lease_deadline is not None
        claimed_at = task.lease_deadline - micros(30)
        assert q.retry(task, error=f"fail {attempt}") == "retried"
        retried = q.get("flaky")
        assert retried is not None
        claims = claims_until_claimed(q, lease=30)
        # the retry's server time lies between the claim and the next claim: the due time is
        # that plus the backoff (doubled per attempt), exactly
        backoff = micros(0.05 * 2 ** (attempt - 1))
        assert claimed_at + backoff <= retried.score <= claims[0].now + backoff
        # not handed out before it is due (exact, whatever the machine's speed)
        assert [bool(c.tasks) for c in claims] == [c.now >= retried.score for c in claims]
        [task] = claims[-1].tasks
    assert (task.attempts, task.last_error) == (3, "fail 2")
    assert q.retry(task, error="fail 3") == "dead"
    assert q.stats()["dead"] == 1
    [dead] = q.tasks(DEAD)
    assert (dead.id, dead.last_error, dead.payload) == ("flaky", "fail 3", "p")
    assert q.requeue_dead() == 1
    [back] = q.pop()
    assert (back.id, back.attempts, back.last_error) == ("flaky", 1, "fail 3")


def test_backoff_grows_with_jitter_and_caps(redis_target: RedisTarget) -> None:
    q = make_queue(redis_target, RETRY_BACKOFF=1.0, RETRY_BACKOFF_MAX=10.0)
    for attempts, full in ((1, 1.0), (2, 2.0), (3, 4.0), (4, 8.0), (9, 10.0), (500, 10.0)):
        samples = [q.backoff(attempts) for _ in range(50)]
        assert all(full / 2 <= s <= full for s in samples)
        assert len(set(samples)) > 1
    exact = make_queue(redis_target, RETRY_BACKOFF=0.5, RETRY_JITTER=False)
    assert [exact.backoff(n) for n in (1, 2, 3)] == [0.5, 1.0, 2.0]


def test_retry_of_a_lost_lease_is_reported(redis_target: RedisTarget) -> None:
    q = make_queue(redis_target)
    q.enqueue("a")
    [task] = q.pop(lease=0.05)
    time.sleep(0.07)
    [again] = q.pop()
    assert q.ack(again) == 1
    assert q.retry(task, delay=0) == "lost"
    assert q.get("a") is None


def test_release_gives_back_in_place_without_counting_an_attempt(
    redis_target: RedisTarget,
) -> None:
    q = make_queue(redis_target)
    q.enqueue_many([("a", 1), ("b", 2), ("c", 3)])
    claimed = q.pop(3)
    assert q.release(claimed[1:]) == 2
    assert [(t.id, t.state) for t in q.top(5)] == [("b", READY), ("c", READY)]
    [b, c] = q.pop(2)
    assert (b.attempts, c.attempts) == (1, 1)


def test_replace_while_in_flight_queues_a_fresh_copy(redis_target: RedisTarget) -> None:
    q = make_queue(redis_target)
    q.enqueue("a", "old")
    [running] = q.pop()
    assert q.enqueue("a", "new", replace=True) is True
    assert q.ack(running) == 0  # the old run's claim is gone: it cannot touch the new copy
    assert q.retry(running, error="x") == "lost"
    assert q.extend_lease(running) is False
    assert q.release([running]) == 0
    [fresh] = q.pop()
    assert (fresh.payload, fresh.attempts) == ("new", 1)
    assert q.ack(running) == 0
    assert q.get("a") is not None and q.ack(fresh) == 1


@pytest.mark.parametrize("count", [1, 3])
def test_requeue_dead_by_id(redis_target: RedisTarget, count: int) -> None:
    q = make_queue(redis_target, MAX_ATTEMPTS=1)
    q.enqueue_many([(f"t{i}", i) for i in range(3)])
    for task in q.pop(3):
        q.retry(task, error="x")
    ids = [f"t{i}" for i in range(count)]
    assert q.requeue_dead(ids) == count
    assert q.stats()["dead"] == 3 - count
    assert sorted(t.id for t in q.top(5)) == ids
