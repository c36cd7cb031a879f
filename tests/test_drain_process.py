"""drain_queue as a real process: SIGTERM gives claimed tasks back, SIGKILL loses nothing.

These run on the real single server and the real cluster (fakeredis cannot be
shared between processes).
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from django_redislock import queues
from django_redislock.backends.redis import RedisQueueBackend
from django_redislock.exceptions import UndecodablePayload
from django_redislock.queue import DELAYED, IN_FLIGHT, Queue

from . import long_idle
from .conftest import RedisTarget
from .processes import finish, spawn, wait_for
from .testapp import tasks

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow


def slow_queue() -> Queue:
    found: Queue = queues["default"].queue("slow")
    return found


def started(tag: str) -> Callable[[], bool]:
    return lambda: any(run.startswith(f"start:{tag}:") for run in tasks.runs())


def test_sigterm_finishes_the_task_and_gives_the_rest_back(real: RedisTarget) -> None:
    for i in range(10):
        tasks.slow.enqueue(args=[f"t{i}", 0.5], id=f"t{i}")
    worker = spawn(real, "slow", "--batch", "10")
    try:
        wait_for(started("t0"), 30, "the first task to start")
        worker.send_signal(signal.SIGTERM)
        code, out, err = finish(worker)
    finally:
        worker.kill()
    assert code == 0, err
    # the rest of t0 and the exit, none of the 9 others (counts, not a duration)
    assert [r.split(":")[0:2] for r in tasks.runs()] == [["start", "t0"], ["end", "t0"]]
    assert "processed 1, failed 0, retried 0, dead 0, released 9" in out
    q = slow_queue()
    assert q.stats()["in_flight"] == 0
    assert [(t.id, t.attempts) for t in q.top(10)] == [(f"t{i}", 0) for i in range(1, 10)]


def blocked_in_blpop(target: RedisTarget) -> bool:
    """Whether a client of ``target`` (any node of a cluster) is blocked in a BLPOP."""
    if target.kind == "cluster":
        nodes = [node.redis_connection for node in target.raw.get_nodes()]
    else:
        nodes = [target.raw]
    return any(
        client.get("cmd") == "blpop" and "b" in client.get("flags", "")
        for node in nodes
        for client in node.client_list()
    )


def test_sigterm_while_idle_exits_at_once(real: RedisTarget) -> None:
    # the idle BLPOP lasts IDLE_WAIT (120 s): a worker that waited for its end instead of
    # cutting it would not exit within finish()'s 30 s, however loaded the machine
    worker = spawn(
        real,
        "slow",
        task_modules=["tests.long_idle"],
        options={"SOCKET_TIMEOUT": long_idle.IDLE_WAIT + 10},
    )
    try:
        assert worker.stdout is not None
        assert worker.stdout.readline().startswith("Draining queue slow")
        wait_for(lambda: blocked_in_blpop(real), 30, "the worker to block in its idle BLPOP")
        worker.send_signal(signal.SIGTERM)
        code, out, err = finish(worker, timeout=30)
    finally:
        worker.kill()
    assert code == 0, err
    assert "processed 0" in out


def test_sigkill_mid_task_runs_it_again_after_the_lease(real: RedisTarget) -> None:
    tasks.slow.enqueue(args=["a", 0], id="a")
    tasks.slow.enqueue(args=["b", 1.5], id="b")
    lease = 1.0
    first = spawn(real, "slow", "--batch", "1", "--lease", str(lease))
    try:
        wait_for(started("b"), 30, "task b to start")
        first.send_signal(signal.SIGKILL)
        killed_at = time.monotonic()
        finish(first)
    finally:
        first.kill()
    q = slow_queue()
    leased = q.get("b")
    assert leased is not None and leased.state == IN_FLIGHT and leased.lease_deadline is not None
    # still leased to the dead worker: a claim before the deadline returns nothing to the
    # ready set (exact: the claim reports the server time it ran at)
    check = q.claim(0)
    if check.now < leased.lease_deadline:
        assert (check.recovered, check.next_due) == (0, None)
    else:  # a very slow machine got here after the deadline: the task is back, due now
        assert check.recovered == 1
    second = spawn(real, "slow", "--max-tasks", "1", "--timeout", "20")
    try:
        code, out, err = finish(second, timeout=30)
    finally:
        second.kill()
    assert code == 0, err
    runs = tasks.runs()
    starts = [r for r in runs if r.startswith("start:b:")]
    assert len(starts) == 2 and starts[0] != starts[1]  # two different worker pids
    assert runs.count("end:a") == 1 and runs.count("end:b") == 1  # the acked task never returned
    assert time.monotonic() - killed_at >= lease
    assert "processed 1," in out
    stats = q.stats()
    assert (stats["ready"], stats["in_flight"], stats["dead"]) == (0, 0, 0)


def test_poison_payloads_are_dead_lettered_and_the_rest_runs(real: RedisTarget) -> None:
    q = slow_queue()
    for i in range(5):
        tasks.slow.enqueue(args=[f"a{i}", 0], id=f"a{i}")
    # bytes an older pickle-configured producer wrote, and JSON nested deeper than a
    # worker can decode (enqueue refuses that now; an older version wrote it)
    params = {**real.params(SERIALIZER="pickle"), "KEY_PREFIX": "test"}
    pickled = RedisQueueBackend("older", params).queue("slow")
    pickled.enqueue("pickled", {"task": "tests.testapp.tasks.slow", "args": ["p", 0]})
    q.enqueue("deep", {"task": "tests.testapp.tasks.slow", "args": ["d", 0]})
    deep = '{"task":"tests.testapp.tasks.slow","args":[' + "[" * 980 + "]" * 980 + ",0]}"
    real.raw.hset(q.keys[3], "deep", deep)
    q.enqueue("not-json", None)
    real.raw.hset(q.keys[3], "not-json", b"\xff\x00 not json")
    q.enqueue("zen", {"task": "this.anything", "args": [], "kwargs": {}})
    for i in range(5):
        tasks.slow.enqueue(args=[f"b{i}", 0], id=f"b{i}")
    code, out, err = finish(spawn(real, "slow", "--burst", "--batch", "20"), timeout=60)
    assert code == 0, err
    ends = sorted(r for r in tasks.runs() if r.startswith("end:"))
    assert ends == sorted([f"end:a{i}" for i in range(5)] + [f"end:b{i}" for i in range(5)])
    assert "processed 14, failed 0, retried 0, dead 4" in out
    assert "Beautiful is better than ugly" not in out + err  # `this` was never imported
    dead = {t.id: t for t in q.tasks("dead")}  # listing never decodes, so never raises
    assert sorted(dead) == ["deep", "not-json", "pickled", "zen"]
    assert "no @task is registered as 'this.anything'" in dead.pop("zen").last_error
    for task in dead.values():
        assert "UndecodablePayload" in task.last_error and "cannot be decoded" in task.last_error
        with pytest.raises(UndecodablePayload):
            task.payload  # noqa: B018
    assert dead["not-json"].payload_text == repr(b"\xff\x00 not json")
    assert dead["deep"].payload_text.startswith('{"task"')
    stats = q.stats()
    assert (stats["ready"], stats["in_flight"], stats["dead"]) == (0, 0, 4)


def test_a_failing_import_is_retried_and_blocks_nobody(real: RedisTarget) -> None:
    q = slow_queue()
    q.enqueue("broken", {"task": "tests.broken_task_module.fn", "args": [], "kwargs": {}})
    q.enqueue("zen", {"task": "this.anything", "args": [], "kwargs": {}})
    for i in range(3):
        tasks.slow.enqueue(args=[f"s{i}", 0], id=f"s{i}")
        tasks.remember.enqueue(args=[f"t{i}"], id=f"t{i}")  # another queue of the worker
    worker = spawn(
        real,
        "slow",
        "tests",
        "--burst",
        task_modules=["tests.broken_task_module"],
        options={"RETRY_BACKOFF": 60},  # still delayed when the test looks
    )
    code, out, err = finish(worker, timeout=60)
    assert code == 0, err
    runs = tasks.runs()
    assert [r for r in runs if r.startswith("end:")] == ["end:s0", "end:s1", "end:s2"]
    assert [r for r in runs if r.startswith("t")] == ["t0", "t1", "t2"]
    assert "Beautiful is better than ugly" not in out + err  # `this` was never imported
    assert "processed 8, failed 2, retried 2, dead 0" in out
    broken = q.get("broken")
    assert broken is not None and broken.state == DELAYED and broken.attempts == 1
    assert "TaskImportError" in broken.last_error and "broken on purpose" in broken.last_error
    # a path in no task module might be a custom @task(name=...) of the broken module:
    # retried too (never imported), dead-lettered once its attempts are used up
    zen = q.get("zen")
    assert zen is not None and zen.state == DELAYED and "broken on purpose" in zen.last_error
    assert "broken on purpose" in err  # logged once when the worker started, and per retry


@pytest.mark.parametrize("verbosity", ["0", "1", "2"])
def test_failures_are_logged_with_their_traceback_by_verbosity(
    real: RedisTarget, verbosity: str
) -> None:
    tasks.always_fails.enqueue(args=["boom"], id="bad")
    tasks.remember.enqueue(args=["fine"], id="good")
    worker = spawn(real, "tests", "--burst", "-v", verbosity, options={"RETRY_BACKOFF": 60})
    code, out, err = finish(worker, timeout=60)
    assert code == 0, err
    assert "processed 2, failed 1" in out
    failure = "task bad (tests.testapp.tasks.always_fails) of 'tests' failed (retried)"
    per_task = "task good (tests.testapp.tasks.remember) of 'tests' succeeded in"
    if verbosity == "0":
        assert err == ""
        return
    assert f"WARNING {failure}" in err
    assert "Traceback (most recent call last)" in err
    assert 'raise ValueError(f"always fails: {tag}")' in err
    assert "ValueError: always fails: boom" in err
    assert (per_task in err) is (verbosity == "2")
