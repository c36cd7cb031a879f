"""The process-pool supervisor in this process, with children that do one thing and exit.

The restart policy (backoff, the failure streak, giving up) and the fork safety of
the Redis clients, without a whole ``drain_queue``; the pool as a real command is
tested in ``tests/test_process_pool.py``.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import re
import time
from pathlib import Path
from typing import NoReturn

import pytest
from django.test import override_settings

from django_redislock import queues
from django_redislock.queue import supervisor
from django_redislock.queue.pool_child import EXIT_DONE, hard_time_limit
from django_redislock.queue.registry import registry
from django_redislock.queue.supervisor import Supervisor

from . import pool_tasks
from .conftest import RedisTarget

pytestmark = pytest.mark.slow


@pytest.fixture
def fast_restarts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(supervisor, "RESTART_FIRST", 0.05)
    monkeypatch.setattr(supervisor, "RESTART_MAX", 0.4)
    monkeypatch.setattr(supervisor, "FAILURE_LIMIT", 6)


def starts_of(log: Path) -> list[float]:
    return [float(line) for line in log.read_text().split()]


def test_a_crash_looping_child_backs_off_and_the_pool_gives_up(
    fast_restarts: None, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    log = tmp_path / "starts"

    def crash(slot: int, pipes: tuple[int, int], close: list[int]) -> NoReturn:
        with log.open("a") as file:
            file.write(f"{time.monotonic()}\n")
        os._exit(3)

    with caplog.at_level(logging.WARNING, "django_redislock.worker.pool"):
        outcome = Supervisor(crash, {}, 1).run()
    assert outcome.failure == "6 children died in a row without finishing a task"
    assert not outcome.ok
    starts = starts_of(log)
    assert len(starts) == 6
    # the planned delays double and stop at the cap (what the supervisor decided, exactly) ...
    planned = [float(d) for d in re.findall(r"replacing it in ([\d.]+)s", caplog.text)]
    delays = [0.05, 0.1, 0.2, 0.4, 0.4]
    assert planned == pytest.approx(delays, abs=0.051)  # the log rounds to 0.1 s
    # ... and no child started before its delay was over (a busy machine only makes it later)
    gaps = [later - earlier for earlier, later in itertools.pairwise(starts)]
    for gap, delay in zip(gaps, delays, strict=True):
        assert delay <= gap


def test_a_child_that_finished_a_task_ends_the_failure_streak(
    fast_restarts: None, tmp_path: Path
) -> None:
    log = tmp_path / "starts"

    def works_then_dies(slot: int, pipes: tuple[int, int], close: list[int]) -> NoReturn:
        with log.open("a") as file:
            file.write(f"{time.monotonic()}\n")
        os.write(pipes[0], b'{"ok":1}\n')  # what a child sends after its first task
        os._exit(3)

    outcome = Supervisor(works_then_dies, {}, 1, deadline=time.monotonic() + 2.0).run()
    assert outcome.ok
    starts = starts_of(log)
    assert len(starts) > 6  # past FAILURE_LIMIT: the streak never built up
    gaps = [later - earlier for earlier, later in itertools.pairwise(starts)]
    assert max(gaps) < 0.05 + 1.0  # always the first delay, never a longer one


def test_a_child_that_ended_its_burst_is_not_replaced(tmp_path: Path) -> None:
    log = tmp_path / "starts"

    def done(slot: int, pipes: tuple[int, int], close: list[int]) -> NoReturn:
        with log.open("a") as file:
            file.write(f"{time.monotonic()}\n")
        os.write(pipes[0], json.dumps({"summary": {"processed": 3, "succeeded": 3}}).encode())
        os.write(pipes[0], b"\n")
        os._exit(EXIT_DONE)

    outcome = Supervisor(done, {}, 3, burst=True).run()
    assert outcome.ok
    assert len(starts_of(log)) == 3
    assert (outcome.summary.processed, outcome.summary.succeeded) == (9, 9)


def test_a_child_stopped_by_a_signal_of_its_own_is_replaced_at_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Replaced with no restart delay (it did not fail): each end is logged as a stop of its
    own, none as a death with a delay (the delay's log line names it), however slowly a
    loaded machine forks the replacements."""
    log = tmp_path / "starts"

    def stopped(slot: int, pipes: tuple[int, int], close: list[int]) -> NoReturn:
        with log.open("a") as file:
            file.write(f"{time.monotonic()}\n")
        os._exit(EXIT_DONE)  # what a child that got its own SIGTERM exits with

    with caplog.at_level(logging.INFO, logger="django_redislock"):
        outcome = Supervisor(stopped, {}, 1, deadline=time.monotonic() + 1.0).run()
    assert outcome.ok
    assert len(starts_of(log)) >= 2  # replaced at least once
    messages = [record.getMessage() for record in caplog.records]
    assert any("stopped by a signal of its own; replacing it" in m for m in messages)
    assert not any("replacing it in" in m for m in messages), messages


def test_a_child_never_uses_the_supervisors_redis_connection(
    single_target: RedisTarget, tmp_path: Path
) -> None:
    result = tmp_path / "child"
    params = {**single_target.params(), "KEY_PREFIX": "test"}
    with override_settings(REDISLOCK_QUEUES={"default": params}):
        parent = queues["default"].client  # type: ignore[attr-defined]
        parent_id = parent.client_id()

        def child(slot: int, pipes: tuple[int, int], close: list[int]) -> NoReturn:
            client = queues["default"].client  # type: ignore[attr-defined]
            result.write_text(json.dumps([client is parent, client.client_id()]))
            os._exit(EXIT_DONE)

        assert Supervisor(child, {}, 1, burst=True).run().ok
        same_object, child_id = json.loads(result.read_text())
        assert not same_object and child_id != parent_id
        assert parent.client_id() == parent_id  # the supervisor's socket is untouched


def test_the_hard_limit_is_the_tasks_else_the_alias_default(single_target: RedisTarget) -> None:
    params = {**single_target.params(), "KEY_PREFIX": "test"}
    with override_settings(REDISLOCK_QUEUES={"default": params}):
        q = queues["default"].queue("pool")
        assert hard_time_limit(pool_tasks.hang, q) == 1.0
        assert hard_time_limit(pool_tasks.step, q) is None


def test_a_child_listens_for_runs_only_when_a_task_has_a_limit(
    single_target: RedisTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    from django_redislock.queue import pool_child

    params = {**single_target.params(), "KEY_PREFIX": "test"}
    with override_settings(REDISLOCK_QUEUES={"default": params}):
        q = queues["default"].queue("pool")
        assert pool_child.limits_possible([q])  # pool_tasks.hang has a time_limit
        without = {k: v for k, v in registry.items() if getattr(v, "time_limit", None) is None}
        monkeypatch.setattr(pool_child, "registry", without)
        assert not pool_child.limits_possible([q])
