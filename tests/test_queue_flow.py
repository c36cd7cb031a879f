"""Pause/resume and the queue's rate limit, in one process, on every kind of server."""

from __future__ import annotations

import asyncio
import time

import pytest

from django_redislock.exceptions import InvalidArgument
from django_redislock.validation import parse_rate

from .conftest import RedisTarget, make_queue


def snapshot(target: RedisTarget, queue_keys: list[str]) -> dict[str, object]:
    """Every key of a queue with its type and content (to show a bad call changed nothing)."""
    out: dict[str, object] = {}
    for key in queue_keys:
        kind = target.raw.type(key)
        kind = kind.decode() if isinstance(kind, bytes) else kind
        if kind == "hash":
            out[key] = target.raw.hgetall(key)
        elif kind == "zset":
            out[key] = target.raw.zrange(key, 0, -1, withscores=True)
        elif kind == "list":
            out[key] = target.raw.lrange(key, 0, -1)
        else:
            out[key] = kind
    return out


# -- pause / resume ------------------------------------------------------------------------


def test_a_paused_queue_hands_out_nothing_and_keeps_taking_tasks(
    redis_target: RedisTarget,
) -> None:
    q = make_queue(redis_target)
    q.enqueue("a", 1)
    q.pause()
    assert q.is_paused() is True
    assert q.enqueue("b", 2) is True  # enqueue is unaffected
    claim = q.claim(10, lease=30, start=False)
    assert claim.tasks == [] and claim.paused is True
    assert claim.next_work is None  # wait for the resume's wake-up, not for "due now"
    assert q.pop(10) == []
    stats = q.stats()
    assert (stats["paused"], stats["ready"]) == (True, 2)
    q.resume()
    assert q.is_paused() is False and q.stats()["paused"] is False
    assert redis_target.raw.llen(q.signal_key) == 1  # resume wakes an idle worker
    assert sorted(t.id for t in q.pop(10)) == ["a", "b"]


def test_a_paused_queue_still_takes_acks_and_recovers_expired_leases(
    redis_target: RedisTarget,
) -> None:
    q = make_queue(redis_target)
    q.enqueue_many([("a", 1), ("b", 2)])
    first = q.claim(1, lease=60, start=False)
    q.claim(1, lease=0.000001, start=False)  # b: its lease ends at once
    q.pause()
    claim = q.claim(5, lease=60, ack=first.tasks, start=False)
    assert claim.acked == 1 and claim.recovered == 1 and claim.tasks == []
    assert q.get("a") is None
    back = q.get("b")
    assert back is not None and back.state == "ready"


def test_a_paused_queue_wakes_no_idle_worker(redis_target: RedisTarget) -> None:
    q = make_queue(redis_target)
    q.enqueue_many([("a", 1), ("b", 2)])
    q.pause()
    q.claim(1, lease=30, start=False)
    # the claim leaves no wake-up token behind: an idle worker blocks instead of spinning
    assert redis_target.raw.llen(q.signal_key) == 0


def test_resume_of_a_queue_that_was_not_paused_changes_nothing(
    redis_target: RedisTarget,
) -> None:
    q = make_queue(redis_target)
    q.resume()
    assert redis_target.raw.llen(q.signal_key) == 0
    assert q.is_paused() is False


def test_pause_and_resume_have_async_twins(redis_target: RedisTarget) -> None:
    q = make_queue(redis_target)

    async def go() -> tuple[bool, bool, str | None]:
        await q.pause_async()
        paused = await q.is_paused_async()
        await q.resume_async()
        await q.set_rate_limit_async("5/m")
        return paused, await q.is_paused_async(), await q.rate_limit_async()

    assert asyncio.run(go()) == (True, False, "5/m")
    assert q.flow_state() == {"paused": False, "rate_limit": "5/m"}
    assert asyncio.run(q.flow_state_async()) == q.flow_state()


# -- rate limit ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "interval", "burst"),
    [
        ("20/s", 50_000, 2),
        ("100/m", 600_000, 1),
        ("5/h", 720_000_000, 1),
        ("1000/s", 1000, 100),
        (" 2.5 / s ", 400_000, 1),
    ],
)
def test_rates_are_parsed(text: str, interval: int, burst: int) -> None:
    rate = parse_rate(text)
    assert (rate.interval, rate.burst) == (interval, burst)


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "10",
        "10/d",
        "-1/s",
        "0/s",
        "0.0/m",
        "abc/s",
        "1e3/s",
        "10/sec",
        10,
        None,
        "2000000/s",
        "1/s/s",
    ],
)
def test_a_malformed_rate_is_refused_naming_the_argument(bad: object) -> None:
    with pytest.raises(InvalidArgument, match=r"^rate must"):
        parse_rate(bad)


def test_a_bad_rate_limit_leaves_redis_unchanged(redis_target: RedisTarget) -> None:
    q = make_queue(redis_target)
    q.enqueue("a", 1)
    q.set_rate_limit("10/s")
    keys = [*q.script_keys, q.flow_key]
    before = snapshot(redis_target, keys)
    with pytest.raises(InvalidArgument, match="rate must"):
        q.set_rate_limit("0/s")
    assert snapshot(redis_target, keys) == before
    assert q.rate_limit() == "10/s"


def test_the_rate_limit_admits_its_burst_and_then_says_when(redis_target: RedisTarget) -> None:
    q = make_queue(redis_target)
    q.enqueue_many([(f"t{i}", i) for i in range(10)])
    q.set_rate_limit("20/s")  # one task every 50 ms, two at once
    assert q.stats()["rate_limit"] == "20/s"
    hour = 3600 * 1_000_000  # the same limit, slowed down so that no refill can race the test
    q._run(q._flow_call("limit", hour, 2, "20/s"))
    claim = q.claim(10, lease=30, start=False)
    assert len(claim.tasks) == 2
    assert claim.next_allowed is not None and claim.next_allowed - claim.now == hour
    assert claim.next_work == claim.next_allowed  # the next task is due, the limit decides
    assert claim.held_back is True
    over = q.claim(10, lease=30, start=False)
    assert over.tasks == [] and over.next_allowed == claim.next_allowed
    # nothing over the limit was claimed or charged: 8 ready, no attempts recorded
    stats = q.stats()
    assert (stats["ready"], stats["in_flight"]) == (8, 2)
    assert all(t.attempts == 0 for t in q.tasks("ready", 20))
    assert redis_target.raw.llen(q.signal_key) == 0  # no worker is woken to spin
    q.set_rate_limit("20/s")  # a new limit starts afresh: a burst of two at once
    assert len(q.claim(10, lease=30, start=False).tasks) == 2


def test_claims_never_pass_the_rate(redis_target: RedisTarget) -> None:
    q = make_queue(redis_target)
    q.enqueue_many([(f"t{i}", i) for i in range(200)])
    q.set_rate_limit("50/s")  # 20 ms apart, 5 at once
    started = time.monotonic()
    claimed = 0
    while time.monotonic() - started < 1.0:
        claimed += len(q.claim(100, lease=30, start=False).tasks)
        time.sleep(0.002)
    elapsed = time.monotonic() - started
    # at most the burst plus the rate over the elapsed time; and the limit did admit tasks
    assert claimed <= 5 + 50 * elapsed + 1
    assert claimed >= 20


def test_removing_the_limit_lets_everything_through(redis_target: RedisTarget) -> None:
    q = make_queue(redis_target)
    q.enqueue_many([(f"t{i}", i) for i in range(10)])
    q.set_rate_limit("1/h")
    assert len(q.pop(10)) == 1
    q.set_rate_limit(None)
    assert q.rate_limit() is None and q.stats()["rate_limit"] is None
    assert len(q.pop(10)) == 9


def test_a_resent_claim_under_a_limit_is_not_charged_twice(redis_target: RedisTarget) -> None:
    from django_redislock.queue.records import Claim

    q = make_queue(redis_target)
    q.enqueue_many([(f"t{i}", i) for i in range(5)])
    q.set_rate_limit("1/h")
    call = q._claim_call(5, 30, (), False)
    first: Claim = q._run(call)
    again: Claim = q._run(call)  # what redis-py sends after a lost reply
    assert [t.id for t in again.tasks] == [t.id for t in first.tasks] == ["t0"]
    assert q.stats()["in_flight"] == 1


def test_setting_the_same_limit_again_keeps_its_state(redis_target: RedisTarget) -> None:
    q = make_queue(redis_target)
    q.enqueue_many([(f"t{i}", i) for i in range(5)])
    q.set_rate_limit("1/h")
    assert len(q.pop(5)) == 1
    q.set_rate_limit("1/h")  # a resent call, or an operator repeating it: no extra burst
    assert q.pop(5) == []
    q.set_rate_limit("2/h")  # a different limit starts afresh
    assert len(q.pop(5)) == 1
