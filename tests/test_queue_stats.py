"""QueueStats: the one record every surface reads a queue's numbers through."""

from __future__ import annotations

import time

import pytest

from django_redislock.admin.summaries import queue_summaries
from django_redislock.locking.pipeline import run_scripts
from django_redislock.queue.stats import (
    QueueStats,
    counters_key,
    stats_or_error,
    summary_call,
)
from django_redislock.scripts import names

from .conftest import RedisTarget, make_queue

NOW = 1_700_000_000_000_000


def reply(*counters: int, first: int = NOW - 2_500_000, lease: int = -1) -> list[object]:
    return [NOW, 3, 5, 1, 2, str(first), str(lease), 0, 1, b"10/s", 4, *counters]


def test_a_reply_reads_into_the_record() -> None:
    stats = QueueStats.from_reply("q", reply(first=NOW - 2_500_000, lease=NOW + 1_000_000))
    assert (stats.ready, stats.delayed, stats.in_flight, stats.dead) == (3, 2, 1, 2)
    assert stats.oldest_due_age == 2.5 and stats.next_lease_in == 1.0
    assert stats.paused is True and stats.rate_limit == "10/s" and stats.total == 8
    assert stats.counters == {} and stats.held == 4  # concurrency groups' held tasks
    with_counters = QueueStats.from_reply("q", reply(4, 0), ("succeeded", "lost"))
    assert with_counters.counters == {"succeeded": 4, "lost": 0}


def test_no_ready_task_and_no_lease_read_as_none() -> None:
    delayed_first = QueueStats.from_reply("q", reply(first=NOW + 60_000_000))
    assert delayed_first.oldest_due is None and delayed_first.oldest_due_age is None
    assert delayed_first.next_lease_in is None
    assert delayed_first.as_dict()["oldest_due_age"] == 0.0


@pytest.mark.parametrize(
    "bad",
    [[], [NOW, "x", 5, 1, 2, -1, -1, 0, 0, "", 0], [*reply(), 7], reply()[:10]],
)
def test_a_malformed_reply_is_a_value_error_naming_the_queue(bad: list[object]) -> None:
    with pytest.raises(ValueError, match="queue 'q'"):
        QueueStats.from_reply("q", bad)
    assert isinstance(stats_or_error("q", bad), ValueError)


def test_only_one_queue_summary_script_ships() -> None:
    shipped = names()
    assert "queue_summary" in shipped
    assert not {"queue_stats", "admin_queue_summary", "metrics_queue"} & set(shipped)


def test_stats_admin_and_metrics_read_the_same_numbers(redis_target: RedisTarget) -> None:
    q = make_queue(redis_target)
    q.enqueue("old", 1)
    time.sleep(0.02)
    q.enqueue("r", 2)
    assert [task.id for task in q.pop(1, lease=60)] == ["old"]
    q.enqueue("later", 3, delay=600)
    q.pause()
    q.set_rate_limit("5/s")
    redis_target.raw.hset(counters_key(q), mapping={"succeeded": 7, "other": 1})
    as_dict = q.stats()
    assert as_dict == {
        "queue": "jobs",
        "ready": 1,
        "delayed": 1,
        "in_flight": 1,
        "dead": 0,
        "expired_leases": 0,
        "oldest_due_age": as_dict["oldest_due_age"],
        "paused": True,
        "rate_limit": "5/s",
    }
    (got,) = run_scripts(q.backend, [summary_call(q, ("succeeded", "failed"))])
    stats = QueueStats.from_reply(q.name, got, ("succeeded", "failed"))
    assert stats.counters == {"succeeded": 7, "failed": 0}
    assert {k: v for k, v in stats.as_dict().items() if k != "oldest_due_age"} == {
        k: v for k, v in as_dict.items() if k != "oldest_due_age"
    }
    assert stats.next_lease_in is not None and 50 < stats.next_lease_in <= 60
    (row,) = queue_summaries(q.backend, [q.name])
    assert row.stats is not None and (row.ready, row.delayed, row.in_flight) == (1, 1, 1)
    assert row.paused and row.rate_limit == "5/s" and row.error == ""
