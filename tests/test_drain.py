"""drain_queue through call_command, on fakeredis, a real server and a real cluster."""

from __future__ import annotations

import io
import json
import os
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import override_settings

from django_redislock import queues, signals, task
from django_redislock.exceptions import InvalidArgument
from django_redislock.queue import DEAD, Queue
from django_redislock.queue.worker import Worker

from .conftest import RedisTarget
from .testapp import tasks

# the worker calls close_old_connections() around every task, which touches the database
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def alias(redis_target: RedisTarget) -> Iterator[RedisTarget]:
    """Point the default queue alias at the target, with fast retries."""
    options = {"RETRY_BACKOFF": 0.01, "RETRY_JITTER": False, "SOCKET_TIMEOUT": 3.0}
    params = {**redis_target.params(**options), "KEY_PREFIX": "test"}
    tasks.CALLS.clear()
    with override_settings(REDISLOCK_QUEUES={"default": params}):
        yield redis_target


def drain(*args: str) -> str:
    out = io.StringIO()
    call_command("drain_queue", *args, stdout=out)
    return out.getvalue()


def queue(name: str = "tests") -> Queue:
    found: Queue = queues["default"].queue(name)
    return found


def test_burst_drain_runs_every_task_once(alias: RedisTarget) -> None:
    for i in range(25):
        tasks.remember.delay(f"t{i}")
    tasks.remember_async.delay("a")
    output = drain("tests", "--burst", "--batch", "7", "--log-every", "10")
    assert sorted(tasks.runs()) == sorted([f"t{i}" for i in range(25)] + ["async:a"])
    assert "processed 26, failed 0, retried 0, dead 0, released 0" in output
    assert output.count("processed 10,") == 1 and output.count("processed 20,") == 1
    stats = queue().stats()
    assert (stats["ready"], stats["in_flight"], stats["dead"]) == (0, 0, 0)


def test_default_queues_are_the_known_ones(alias: RedisTarget) -> None:
    tasks.remember.delay("x")
    tasks.slow.delay("y", 0)
    output = drain("--burst")
    draining = output.splitlines()[0]
    assert "slow" in draining and "tests" in draining
    assert sorted(tasks.runs()) == sorted(["end:y", "x", f"start:y:{os.getpid()}"])


def test_failures_retry_then_die_with_signals(alias: RedisTarget) -> None:
    seen: list[tuple[str, str]] = []

    def receiver(name: str) -> Any:
        def handler(sender: Any, task: Any, **kwargs: Any) -> None:
            seen.append((name, task.id))

        return handler

    handlers = {
        sig: receiver(name)
        for sig, name in [
            (signals.task_started, "started"),
            (signals.task_succeeded, "succeeded"),
            (signals.task_failed, "failed"),
            (signals.task_dead, "dead"),
        ]
    }
    for sig, handler in handlers.items():
        sig.connect(handler)
    try:
        bad = tasks.always_fails.delay("x")
        good = tasks.remember.delay("ok")
        # the retry is due 10 ms later; a worker that ignored the due time would sleep in its
        # idle wait (2.5 s) past this timeout and stop after 2 tasks
        output = drain("tests", "--timeout", "2.0", "--max-tasks", "3")
    finally:
        for sig, handler in handlers.items():
            sig.disconnect(handler)
    assert "processed 3, failed 2, retried 1, dead 1" in output
    assert tasks.runs().count("fail:x") == 2
    assert [e for e in seen if e[1] == bad] == [
        ("started", bad),
        ("failed", bad),
        ("started", bad),
        ("dead", bad),
    ]
    assert ("succeeded", good) in seen
    dead = queue().get(bad)
    assert dead is not None and dead.state == DEAD
    assert dead.last_error.startswith("ValueError: always fails: x")


def test_a_tasks_own_backoff_delays_its_retry(alias: RedisTarget) -> None:
    """``@task(retry_backoff=...)`` replaces the alias's RETRY_BACKOFF (0.01 s here)."""
    task_id = tasks.fails_slowly.delay("x")
    before = time.time()
    drain("tests", "--burst")
    assert tasks.runs() == ["fail-slowly:x"]  # not retried at once
    retried = queue().get(task_id)
    assert retried is not None and retried.state == "delayed"
    assert 90 <= retried.score / 1e6 - before <= 110  # jitter is off for this alias


def test_a_tasks_backoff_is_checked() -> None:
    with pytest.raises(InvalidArgument, match="retry_backoff_max"):
        task(retry_backoff_max=-1)(tasks.record)


def test_deleted_function_is_dead_lettered_and_the_worker_goes_on(alias: RedisTarget) -> None:
    q = queue()
    q.enqueue("gone", {"task": "tests.testapp.tasks.deleted_function", "args": [], "kwargs": {}})
    q.enqueue("gone-module", {"task": "tests.no_such_module.fn", "args": [], "kwargs": {}})
    q.enqueue("raw", {"not": "a task"})
    tasks.remember.delay("after")
    output = drain("tests", "--burst")
    assert tasks.runs() == ["after"]
    assert "processed 4, failed 0, retried 0, dead 3" in output
    errors = {t.id: t.last_error for t in q.tasks(DEAD)}
    assert "no @task is registered as 'tests.testapp.tasks.deleted_function'" in errors["gone"]
    assert "deleted or renamed" in errors["gone-module"]
    assert "has no @task payload" in errors["raw"]


def test_a_broken_task_module_costs_only_its_own_tasks(alias: RedisTarget) -> None:
    q = queue()
    tasks.remember.delay("before")
    q.enqueue("broken", {"task": "tests.broken_task_module.fn", "args": [], "kwargs": {}})
    tasks.remember.delay("after")
    params: dict[str, Any] = settings.REDISLOCK_QUEUES["default"]
    # MAX_ATTEMPTS 1: a task at fault would be dead now; one whose module is broken waits
    options = {**params["OPTIONS"], "RETRY_BACKOFF": 60, "MAX_ATTEMPTS": 1}
    slow_retries = {**params, "OPTIONS": options}
    with override_settings(
        REDISLOCK_TASK_MODULES=["tests.broken_task_module"],
        REDISLOCK_QUEUES={"default": slow_retries},
    ):
        output = drain("tests", "--burst")
        [waiting] = queue().tasks("delayed")  # retried with backoff, not at the head
    assert tasks.runs() == ["before", "after"]
    assert "processed 3, failed 1, retried 1, dead 0" in output
    assert (waiting.id, waiting.attempts) == ("broken", 1)
    assert waiting.score > q.claim(0).now + 20_000_000  # 30-60 s away (jitter)
    assert "broken on purpose" in waiting.last_error
    assert q.stats()["in_flight"] == 0


def test_max_tasks_and_unstarted_tasks_are_released(alias: RedisTarget) -> None:
    for i in range(10):
        tasks.remember.delay(f"t{i}")
    output = drain("tests", "--max-tasks", "4", "--batch", "3")
    assert len(tasks.runs()) == 4 and "processed 4," in output
    assert queue().stats()["ready"] == 6 and queue().stats()["in_flight"] == 0


def test_bad_options_are_command_errors(alias: RedisTarget) -> None:
    with pytest.raises(CommandError, match="--batch"):
        drain("tests", "--batch", "0")
    with pytest.raises(CommandError, match="name"):
        drain("a{b}", "--burst")
    with pytest.raises(CommandError, match="nope"):
        drain("tests", "--using", "nope")


class TTY(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_bar_on_a_terminal(alias: RedisTarget) -> None:
    for i in range(3):
        tasks.remember.delay(f"t{i}")
    out = TTY()
    call_command("drain_queue", "tests", "--burst", stdout=out)
    assert "3task" in out.getvalue().replace(" ", "") and "processed 3" in out.getvalue()


def wait_until_idle(worker: Worker, thread: threading.Thread) -> None:
    """Wait (at most 5 s) until the worker thread blocks in its idle wait."""
    deadline = time.monotonic() + 5
    while not worker._waiting and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.002)


def test_idle_worker_wakes_on_enqueue_without_polling(alias: RedisTarget) -> None:
    worker = Worker([queue()], timeout=10, max_tasks=2)
    thread = threading.Thread(target=worker.run)
    thread.start()
    try:
        wait_until_idle(worker, thread)
        started = time.monotonic()
        tasks.remember.delay("wake")
        while "wake" not in tasks.CALLS and time.monotonic() < started + 3:
            time.sleep(0.002)
        woke = time.monotonic() - started
        delayed_at = time.monotonic()  # before the enqueue: the task is due 0.3 s after it
        tasks.remember.enqueue(args=["d"], delay=0.3)
        while "d" not in tasks.CALLS and time.monotonic() < delayed_at + 3:
            time.sleep(0.002)
        delayed = time.monotonic() - delayed_at
    finally:
        worker.stop()
        thread.join(5)
    # push, not polling: the idle wait is a 2.5 s BLPOP (SOCKET_TIMEOUT 3 s minus 0.5), which a
    # worker that ignored the push (or the due time of the delayed task) would sleep through;
    # the 1.5 s bounds leave more than a second for a stall of a loaded CI machine
    assert woke < 1.5, woke
    assert 0.25 < delayed < 1.5, delayed
    assert worker.summary.processed == 2


def test_idle_worker_sends_few_commands(alias: RedisTarget) -> None:
    if alias.kind != "single":
        pytest.skip("commandstats of one real server")
    raw = alias.raw
    worker = Worker([queue(), queue("other")], timeout=2.0)
    raw.config_resetstat()
    summary = worker.run()
    stats = raw.info("commandstats")
    claims = sum(
        int(stats.get(k, {"calls": 0})["calls"]) for k in ("cmdstat_evalsha", "cmdstat_eval")
    )
    waits = int(stats["cmdstat_blpop"]["calls"])
    assert summary.processed == 0
    # one claim per queue, then a BLPOP for the whole idle period (capped at 5 s), no poll loop;
    # plus the workers registry's first heartbeat and its leave (the next beat is 5 s away)
    assert (claims, waits) == (2 + 2, 1), stats


def test_queue_status_lists_every_queue(alias: RedisTarget) -> None:
    tasks.remember.delay("x")
    q = queue("other")
    q.enqueue("d", None, delay=60)
    out = io.StringIO()
    call_command("queue_status", "--json", stdout=out)
    rows = {row["queue"]: row for row in json.loads(out.getvalue())}
    assert rows["tests"]["ready"] == 1 and rows["other"]["delayed"] == 1
    assert rows["slow"]["ready"] == 0  # declared by @task, never used
    text = io.StringIO()
    call_command("queue_status", stdout=text)
    assert text.getvalue().splitlines()[0].split() == [
        "alias",
        "queue",
        "ready",
        "delayed",
        "in_flight",
        "dead",
        "oldest_due_age",
    ]


def test_a_long_batch_keeps_its_leases(alias: RedisTarget) -> None:
    # the batch runs 1.6 s under a 1 s lease: its later tasks would be handed out again if
    # nothing renewed them (renewals come every third of the lease: 0.5 s of slack)
    for i in range(4):
        tasks.slow.enqueue(args=[f"t{i}", 0.4], id=f"t{i}")
    slow = queue("slow")
    worker = Worker([slow], lease=1.0, batch=4, max_tasks=4)
    thread = threading.Thread(target=worker.run)
    thread.start()
    try:
        stolen: list[Any] = []
        deadline = time.monotonic() + 15
        while "start:t0" not in " ".join(tasks.CALLS) and thread.is_alive():
            if time.monotonic() > deadline:
                break
            time.sleep(0.005)  # the worker has claimed the batch
        while thread.is_alive() and time.monotonic() < deadline:
            stolen += slow.pop(4)  # another worker: must never get a task of the batch
            time.sleep(0.05)
    finally:
        thread.join(5)
    assert stolen == []
    assert [r for r in tasks.runs() if r.startswith("end")] == [f"end:t{i}" for i in range(4)]
    assert worker.summary.processed == 4 and slow.stats()["in_flight"] == 0


def test_idle_worker_of_several_queues_wakes_for_any(alias: RedisTarget) -> None:
    worker = Worker([queue("slow"), queue()], timeout=5, max_tasks=1)
    thread = threading.Thread(target=worker.run)
    thread.start()
    try:
        wait_until_idle(worker, thread)
        started = time.monotonic()
        tasks.remember.delay("second queue")
        thread.join(5)
        woke = time.monotonic() - started
    finally:
        worker.stop()
        thread.join(5)
    # one BLPOP over both lists, woken by the push (without it: the 2.5 s idle wait); on a
    # Cluster the lists are in different slots, so the worker waits on them in turn for at
    # most 1 s each (without that: 2.5 s on one list)
    assert woke < (2.2 if alias.kind == "cluster" else 1.5), woke
    assert tasks.CALLS == ["second queue"]


def test_connections_are_checked_between_tasks(alias: RedisTarget) -> None:
    from unittest import mock

    for i in range(3):
        tasks.remember.delay(f"t{i}")
    with (
        mock.patch("django_redislock.queue.worker.close_old_connections") as close,
        mock.patch("django_redislock.queue.runs.close_old_connections", close),
    ):
        Worker([queue()], burst=True, batch=10).run()
    assert close.call_count == 4  # before each of the 3 tasks and after the last


def test_connections_are_checked_only_once_one_was_opened(
    alias: RedisTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    from django.db import connection
    from django.db.backends.signals import connection_created

    from django_redislock.queue import database

    checks: list[int] = []
    monkeypatch.setattr(database, "opened", False)  # as in a worker that never used the DB
    monkeypatch.setattr(database, "django_close_old_connections", lambda: checks.append(1))
    for i in range(3):
        tasks.remember.delay(f"t{i}")
    # in a thread of its own: Django's connections are per thread, and this one has none
    thread = threading.Thread(target=Worker([queue()], burst=True, batch=10).run)
    thread.start()
    thread.join(30)
    assert checks == []  # no connection: nothing to close, and no per-task lookup
    # what Django sends when it opens a connection (a task's first query, say)
    connection_created.send(sender=type(connection), connection=connection)
    for i in range(3):
        tasks.remember.delay(f"u{i}")
    Worker([queue()], burst=True, batch=10).run()
    assert len(checks) == 4  # before each of the 3 tasks and after the last, as Django's


def test_a_connection_opened_before_the_worker_started_is_checked(
    alias: RedisTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    from django.db import connection

    from django_redislock.queue import database

    connection.ensure_connection()  # this thread's connection, opened before the worker
    checks: list[int] = []
    monkeypatch.setattr(database, "opened", False)  # as if no signal had reached the module
    monkeypatch.setattr(database, "django_close_old_connections", lambda: checks.append(1))
    for i in range(3):
        tasks.remember.delay(f"t{i}")
    Worker([queue()], burst=True, batch=10).run()
    assert len(checks) == 4  # before each of the 3 tasks and after the last


def test_waiting_tasks_keep_their_leases_during_a_long_task(alias: RedisTarget) -> None:
    # t0 is short (under half the lease: no renewal before t1 starts); t1 runs 0.8 s of its
    # 1.2 s lease but ends after the batch's claim + 1.2 s: without the keeper thread t1
    # (running), t2 (waiting) and t0 (finished, not yet acked) would all be handed out again.
    # The slack a stalled machine can eat: 0.4 s for t1, half the lease for the others.
    for tag, seconds in (("t0", 0.5), ("t1", 0.8), ("t2", 0.01)):
        tasks.slow.enqueue(args=[tag, seconds], id=tag)
    slow = queue("slow")
    worker = Worker([slow], lease=1.2, batch=3, max_tasks=3)
    thread = threading.Thread(target=worker.run)
    thread.start()
    try:
        stolen: list[Any] = []
        deadline = time.monotonic() + 15
        while "start:t0" not in " ".join(tasks.CALLS) and thread.is_alive():
            if time.monotonic() > deadline:
                break
            time.sleep(0.005)
        while thread.is_alive() and time.monotonic() < deadline:
            stolen += slow.pop(3)
            time.sleep(0.02)
    finally:
        thread.join(5)
    assert stolen == []
    assert [r for r in tasks.runs() if r.startswith("end")] == ["end:t0", "end:t1", "end:t2"]
