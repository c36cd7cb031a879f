"""Task history (queue/history.py, scripts/fragments/history.lua) on a real server and cluster."""

from __future__ import annotations

import os
import socket
import time

import pytest

from django_redislock import task
from django_redislock.queue import Queue
from django_redislock.queue.history import RUNS, TASKS, read
from django_redislock.queue.worker import Worker

from .conftest import RedisTarget, make_queue


@pytest.fixture(params=["single", "cluster"])
def queue(request: pytest.FixtureRequest) -> Queue:
    target: RedisTarget = request.getfixturevalue(f"{request.param}_target")
    return make_queue(target, "hist", RETRY_BACKOFF=0.001, RETRY_JITTER=False)


def fail_once(queue: Queue, id: str, error: str = "boom", **kw: object) -> str:
    (task,) = [t for t in queue.pop(1) if t.id == id]
    return queue.retry(task, delay=0, error=error, **kw)  # type: ignore[arg-type]


def test_each_failed_run_is_recorded(queue: Queue) -> None:
    queue.enqueue("a", {"n": 1})
    assert fail_once(queue, "a", "ValueError: first", max_attempts=2, runtime=0.25) == "retried"
    assert fail_once(queue, "a", "KeyError: second", max_attempts=2) == "dead"
    runs = read(queue, "a")
    assert [(r.attempt, r.outcome) for r in runs] == [(1, "retried"), (2, "dead")]
    assert runs[0].error == "ValueError: first" and runs[1].error == "KeyError: second"
    assert runs[0].runtime == 0.25 and runs[1].runtime is None
    assert runs[0].worker == f"{socket.gethostname()}:{os.getpid()}"
    assert runs[0].started is not None and runs[0].started < runs[0].ended <= runs[1].ended
    assert read(queue, "never-ran") == []


def test_a_resent_retry_records_nothing_twice(queue: Queue) -> None:
    queue.enqueue("a", None)
    (task,) = queue.pop(1)
    assert queue.retry(task, delay=60, error="boom") == "retried"
    assert queue.retry(task, delay=60, error="boom") == "lost"  # what a resend meets
    assert len(read(queue, "a")) == 1


def test_errors_are_capped_keeping_both_ends(queue: Queue) -> None:
    queue.enqueue("a", None)
    error = "HeadError: message\n" + "x" * 3000 + "\nraise HeadError at the end"
    fail_once(queue, "a", error)
    (run,) = read(queue, "a")
    assert len(run.error) < 1600
    assert run.error.startswith("HeadError: message") and run.error.endswith("at the end")


def test_an_old_id_queued_again_starts_a_new_history(queue: Queue) -> None:
    queue.enqueue("a", None)
    fail_once(queue, "a", "old", max_attempts=1)
    queue.enqueue("a", None, replace=True)  # back from the dead: a new task, attempts reset
    fail_once(queue, "a", "new")
    assert [(r.attempt, r.error) for r in read(queue, "a")] == [(1, "new")]


@pytest.mark.slow
def test_history_is_bounded_per_task_and_per_queue(queue: Queue) -> None:
    queue.enqueue("busy", None)
    for _ in range(5000):
        (task,) = queue.pop(1)
        queue.retry(task, delay=0, error="E" * 2000, max_attempts=5000, runtime=0.001)
    runs = read(queue, "busy")
    assert len(runs) == RUNS and runs[-1].attempt == 5000 and runs[-1].outcome == "dead"
    client = queue.backend.client
    assert client.hstrlen(queue.history_key, "busy") < RUNS * 1800
    # more failing tasks than the queue keeps: the ones with the oldest runs are dropped
    queue.enqueue_many([(f"t{i}", None) for i in range(TASKS + 50)])
    for task in queue.pop(TASKS + 50):
        queue.retry(task, delay=60, error="boom")
    assert client.hlen(queue.history_key) == TASKS
    assert client.zcard(queue.history_index_key) == TASKS
    assert read(queue, "busy") == [] and read(queue, "t0") == []
    assert len(read(queue, f"t{TASKS + 49}")) == 1
    assert 0 < client.pttl(queue.history_key) <= 7 * 86400 * 1000


def test_foreign_keys_at_the_history_names_fail_no_retry(queue: Queue) -> None:
    client = queue.backend.client
    client.set(queue.history_key, "another program's string")
    client.sadd(queue.history_index_key, "x")
    queue.enqueue("a", None)
    assert fail_once(queue, "a", "boom") == "retried"  # retried, nothing recorded
    assert client.get(queue.history_key) == b"another program's string"
    assert queue.stats()["ready"] == 1


SEEN: dict[str, int] = {}


@task(queue="hist", name="tests.history.second_time_lucky")
def second_time_lucky(key: str) -> str:
    SEEN[key] = SEEN.get(key, 0) + 1
    if SEEN[key] == 1:
        raise ConnectionResetError("the gateway hung up")
    return key


@pytest.mark.django_db(transaction=True)
def test_a_worker_records_the_run_that_ends_a_failed_task(queue: Queue) -> None:
    SEEN.clear()
    queue.enqueue_many(
        [
            ("lucky", second_time_lucky.payload(["lucky"], None)),
            ("first", second_time_lucky.payload(["first"], None)),
        ]
    )
    SEEN["first"] = 1  # succeeds at once: nothing to record
    deadline = time.monotonic() + 30
    while queue.stats()["ready"] + queue.stats()["delayed"] and time.monotonic() < deadline:
        Worker([queue], burst=True).run()
    runs = read(queue, "lucky")
    assert [(r.attempt, r.outcome) for r in runs] == [(1, "retried"), (2, "succeeded")]
    assert "ConnectionResetError: the gateway hung up" in runs[0].error and runs[1].error == ""
    assert runs[0].runtime is not None and runs[1].runtime is not None
    assert runs[1].worker == f"{socket.gethostname()}:{os.getpid()}"
    assert read(queue, "first") == []
