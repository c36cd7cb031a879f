"""A worker's outage bookkeeping (queue/outages.py): backoff, give-up and the two log lines."""

from __future__ import annotations

import logging
import time

import pytest

from django_redislock.queue.outages import RECONNECT_FIRST, RECONNECT_MAX, Outage
from django_redislock.queue.stops import WorkerGaveUp


def test_delays_double_with_jitter_up_to_the_cap() -> None:
    outage = Outage(give_up=3600)
    error = ConnectionError("down")
    delays = [outage.next_delay(error) for _ in range(12)]
    for tries, delay in enumerate(delays):
        ceiling = min(RECONNECT_MAX, RECONNECT_FIRST * 2**tries)
        assert ceiling / 2 <= delay <= ceiling
    assert max(delays) <= RECONNECT_MAX


def test_no_delay_runs_past_the_give_up_time_and_then_it_gives_up() -> None:
    outage = Outage(give_up=0.3)
    error = ConnectionError("down")
    for _ in range(5):  # the cap of the doubling would pass 0.3 s
        assert outage.next_delay(error) <= 0.3
    time.sleep(0.35)
    with pytest.raises(WorkerGaveUp, match=r"give-up time of 0.3s .*WORKER_GIVE_UP.*: down"):
        outage.next_delay(error)


def test_an_outage_is_logged_when_it_begins_and_when_it_ends(
    caplog: pytest.LogCaptureFixture,
) -> None:
    outage = Outage(give_up=60)
    with caplog.at_level(logging.WARNING, logger="django_redislock.worker"):
        outage.ended()  # no outage: nothing to say
        for _ in range(3):
            outage.next_delay(ConnectionError("refused"))
        outage.ended()
        outage.ended()
    messages = [record.getMessage() for record in caplog.records]
    assert len(messages) == 2, messages
    assert messages[0].startswith("Redis is unreachable (refused)")
    assert messages[1].startswith("Redis answers again after")
    assert outage.since is None
    # the next outage starts from the first delay again
    assert outage.next_delay(ConnectionError("again")) <= RECONNECT_FIRST
