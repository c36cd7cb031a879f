"""Claims, in one process: tokens, attempts per run, reply bounds and the worker's settings."""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command
from django.test import override_settings

from django_redislock.checks import check_settings
from django_redislock.handlers import queues
from django_redislock.queue import IN_FLIGHT
from django_redislock.queue.calls import MAX_CLAIM_BYTES
from django_redislock.queue.worker import Worker

from .conftest import RedisTarget, make_queue


def test_a_stale_retry_is_lost_and_cannot_dead_letter_the_new_holder(
    redis_target: RedisTarget,
) -> None:
    q = make_queue(redis_target, MAX_ATTEMPTS=2)
    q.enqueue("a", 1)
    [old] = q.pop(lease=0.000001)  # expires at once: the next pop hands it out again
    [new] = q.pop(lease=60)
    assert new.id == "a" and new.claim != old.claim
    assert q.retry(old, error="stale", max_attempts=1) == "lost"
    assert q.ack(old) == 0
    assert q.extend_lease(old) is False
    held = q.get("a")
    assert held is not None and held.state == IN_FLIGHT and held.attempts == 2
    assert q.ack(new) == 1
    assert q.get("a") is None


def test_a_claim_without_start_costs_no_attempt_until_the_run_starts(
    redis_target: RedisTarget,
) -> None:
    q = make_queue(redis_target, MAX_ATTEMPTS=1)
    q.enqueue_many([("a", 1), ("b", 2)])
    claim = q.claim(2, lease=0.000001, start=False)
    a, b = claim.tasks
    assert (a.attempts, b.attempts) == (1, 1)  # the number of the run each would be
    assert q.start(a, lease=0.000001, max_attempts=3) is True
    assert q.start(a, lease=0.000001, max_attempts=3) is True  # once per claim
    again = q.claim(2, lease=60, start=False)  # both leases expired
    by_id = {t.id: t for t in again.tasks}
    # a's run was recorded (attempt 1 of its own 3, not the queue's 1): back, a suspect
    assert (by_id["a"].attempts, by_id["a"].suspect) == (2, True)
    # b never started: no attempt counted, though MAX_ATTEMPTS is 1
    assert (by_id["b"].attempts, by_id["b"].suspect) == (1, True)
    assert "no attempt counted" in by_id["b"].last_error


def test_a_claim_reply_is_bounded(single_target: RedisTarget) -> None:
    q = make_queue(single_target, MAX_PAYLOAD_BYTES=2 * 1024 * 1024)
    big = "x" * (2 * 1024 * 1024 - 100)
    count = MAX_CLAIM_BYTES // len(big) + 3
    q.enqueue_many([(f"t{i:02d}", big) for i in range(count)], batch_size=1)
    tasks = q.pop(count)
    assert len(tasks) == MAX_CLAIM_BYTES // (len(big) + 2)  # each payload is a JSON string
    assert q.stats()["ready"] == count - len(tasks)


def test_drain_queue_refuses_a_bad_give_up() -> None:
    with pytest.raises(CommandError, match="--give-up must be a number of seconds > 0"):
        call_command("drain_queue", "--give-up", "0")


def test_worker_give_up_option_is_validated() -> None:
    aliases = {"default": {"LOCATION": "redis://127.0.0.1:1/0", "OPTIONS": {"WORKER_GIVE_UP": -1}}}
    with override_settings(REDISLOCK_QUEUES=aliases):
        try:
            messages = [m.msg for m in check_settings()]
        finally:
            queues.reset()
    assert any("OPTIONS['WORKER_GIVE_UP'] must be > 0" in m for m in messages), messages


@pytest.mark.django_db
def test_a_resent_claim_answers_the_first_and_a_drain_frees_its_request_keys(
    single_target: RedisTarget,
) -> None:
    q = make_queue(single_target)
    q.enqueue_many([(f"t{i:03d}", i) for i in range(500)])
    call = q._claim_call(10, 60, [], True)
    first, again = q._run(call), q._run(call)
    assert [(t.id, t.claim) for t in again.tasks] == [(t.id, t.claim) for t in first.tasks]
    assert q.stats()["in_flight"] == 10  # the resend claimed nothing more
    q.release(first.tasks)
    worker = Worker([q], batch=50, burst=True)
    assert worker.run().processed == 500
    client = q.backend.client
    left = [k for k in client.scan_iter(match="*req:*", count=1000) if client.type(k) == b"list"]
    # each claim freed the previous one's key: only the first claim's (made by hand, not
    # passed back) and the worker's last one wait for their 60 s (acks keep a string each)
    assert len(left) <= 2, left
