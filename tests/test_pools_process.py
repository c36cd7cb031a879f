"""The pools and time limits with real drain_queue processes, on the single server and cluster.

A mixed workload runs to completion in every pool; SIGTERM gives back at once what
did not start; a run that cannot be ended stops its worker, and no other worker
runs that task while it still runs.
"""

from __future__ import annotations

import signal
import time

import pytest

from django_redislock import queues
from django_redislock.queue import Queue

from .conftest import RedisTarget
from .processes import finish, spawn, wait_for
from .servers import RedisProcess
from .test_claims_process import Place, aof_place, runs_of  # noqa: F401 - a fixture
from .testapp import tasks

pytestmark = pytest.mark.slow


def pool_queue() -> Queue:
    found: Queue = queues["default"].queue("pool")
    return found


def stamps(kind: str) -> list[tuple[str, int, float]]:
    """``(tag, pid, wall time)`` of the recorded ``kind`` entries."""
    found = []
    for entry in tasks.runs():
        parts = entry.split(":")
        if parts[0] == kind and len(parts) == 4:
            found.append((parts[1], int(parts[2]), float(parts[3])))
    return found


def tags(kind: str) -> list[str]:
    return sorted(tag for tag, _, _ in stamps(kind))


@pytest.mark.parametrize("pool", ["solo", "thread", "async"])
def test_each_pool_drains_a_mixed_workload(real: RedisTarget, pool: str) -> None:
    for i in range(6):
        tasks.wait_io.enqueue(args=[f"s{i}", 0.1], id=f"s{i}")
        tasks.wait_io_async.enqueue(args=[f"a{i}", 0.1], id=f"a{i}")
    tasks.fails_once.enqueue(args=["flaky"], id="flaky")
    tasks.fails_always.enqueue(args=["bad"], id="bad")
    tasks.spins.enqueue(args=["spin"], id="spin")
    tasks.cleans_up.enqueue(args=["soft"], id="soft")
    extra = [] if pool == "solo" else ["--concurrency", "6"]
    # 12 runs, flaky twice, bad, spin, soft: 17 runs
    worker = spawn(real, "pool", "--pool", pool, *extra, "--max-tasks", "17", "--timeout", "40")
    code, out, err = finish(worker, timeout=60)
    assert code == 0, err
    assert "processed 17, failed 3, retried 1, dead 2" in out, out + err
    assert tags("end") == sorted([f"s{i}" for i in range(6)] + [f"a{i}" for i in range(6)])
    assert tags("ok") == ["flaky"] and tags("fail") == ["bad", "flaky"]
    assert tags("soft") == ["soft"]  # the soft limit was raised inside the task
    assert tags("cleanup") == ["spin"]  # the hard limit ended it; its finally ran
    q = pool_queue()
    dead = {t.id: t.last_error for t in q.tasks("dead")}
    assert sorted(dead) == ["bad", "spin"]
    assert "TimeLimitExceeded: ran longer than 1 s (time_limit)" in dead["spin"]
    stats = q.stats()
    assert (stats["ready"], stats["delayed"], stats["in_flight"]) == (0, 0, 0)


@pytest.mark.parametrize("pool", ["thread", "async"])
def test_sigterm_finishes_running_tasks_and_gives_the_rest_back(
    real: RedisTarget, pool: str
) -> None:
    for i in range(20):
        tasks.wait_io.enqueue(args=[f"t{i}", 1.0], id=f"t{i}")
    worker = spawn(real, "pool", "--pool", pool, "--concurrency", "4")
    try:
        wait_for(lambda: len(stamps("start")) >= 4, 30, "four tasks to start")
        worker.send_signal(signal.SIGTERM)
        code, out, err = finish(worker, timeout=30)
    finally:
        worker.kill()
    assert code == 0, err
    # the running ones finished, no other started, the rest went back at once (the lease
    # is 60 s): counts and states, not a duration, which a loaded machine stretches
    started = tags("start")
    assert len(started) == 4 and tags("end") == started
    assert "processed 4, failed 0" in out, out
    q = pool_queue()
    stats = q.stats()
    assert (stats["ready"], stats["in_flight"]) == (16, 0)  # back at once, not after a lease
    assert all(t.attempts == 0 for t in q.top(20))


def test_a_run_that_cannot_be_ended_stops_its_worker_and_no_one_else_runs_it(
    real: RedisTarget,
) -> None:
    # "hung" blocks in time.sleep(8) past its 1 s limit: the thread cannot be interrupted.
    # Its worker stops claiming, lets "long" finish (6 s), and exits non-zero; meanwhile
    # the lease of "hung" (its own, 3 s) is renewed, so worker B, polling all along, gets it
    # only after that (without the renewal: about 4 s in, while the first still runs it).
    tasks.hangs_in_c.enqueue(args=["hung"], id="hung")
    tasks.wait_io.enqueue(args=["long", 6.0], id="long")
    first = spawn(real, "pool", "--pool", "thread", "--concurrency", "2", "--lease", "15")
    second = None
    try:
        wait_for(lambda: len(stamps("start")) >= 2, 30, "both tasks to start")
        second = spawn(real, "pool", "--max-tasks", "1", "--timeout", "40")
        deadline = time.monotonic() + 40
        while first.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        first_exit = time.time()
        code, out, err = finish(first, timeout=5)
        assert code != 0 and "outlived its time limit" in err, out + err
        code2, _, err2 = finish(second, timeout=40)
    finally:
        first.kill()
        if second is not None:
            second.kill()
    assert code2 == 0, err2
    runs = [(pid, at) for tag, pid, at in stamps("start") if tag == "hung"]
    assert len(runs) == 2 and runs[0][0] == first.pid and runs[1][0] == second.pid
    assert runs[1][1] >= first_exit - 0.05, tasks.runs()  # never while the first still ran it
    assert tags("end") == ["long"]  # the first run never got to its end; nor the second
    [dead] = pool_queue().tasks("dead")
    assert dead.id == "hung" and dead.attempts == 2
    assert "TimeLimitExceeded: ran longer than 1 s" in dead.last_error


@pytest.mark.parametrize("own_lease", [True, False])
def test_a_solo_run_that_cannot_be_ended_gives_its_batch_back_and_exits(
    real: RedisTarget, own_lease: bool
) -> None:
    # with its own lease its start is recorded before it runs; without, the keeper would
    # record it 10 s in (a third of the 30 s lease): the worker records it when it gives up
    make = tasks.ignores_alarm if own_lease else tasks.ignores_alarm_on_the_claim_lease
    make.enqueue(args=["stuck"], id="stuck")
    for i in range(3):
        tasks.wait_io.enqueue(args=[f"w{i}", 0], id=f"w{i}")
    worker = spawn(real, "pool", "--batch", "10", "--lease", "30")
    code, out, err = finish(worker, timeout=30)
    assert code == 70, out + err  # EXIT_HUNG, at 1 s + 2 s of grace, not the task's 15 s
    # the task never reached its end (15 s in): the worker gave up on it and exited first
    assert tags("start") == ["stuck"] and tags("end") == [], tasks.runs()
    assert "outlived" not in out and "still running" in err
    q = pool_queue()
    assert sorted((t.id, t.attempts) for t in q.top(10)) == [("w0", 0), ("w1", 0), ("w2", 0)]
    stuck = q.get("stuck")
    # still leased (renewed until the process ended), and its run was charged
    assert stuck is not None and stuck.state == "in_flight" and stuck.attempts == 1
    assert tags("end") == []


def test_a_second_sigterm_stops_a_thread_pool_at_once(real: RedisTarget) -> None:
    for i in range(4):
        tasks.wait_io.enqueue(args=[f"t{i}", 20.0], id=f"t{i}")
    worker = spawn(real, "pool", "--pool", "thread", "--concurrency", "4")
    try:
        wait_for(lambda: len(stamps("start")) >= 4, 30, "four tasks to start")
        worker.send_signal(signal.SIGTERM)
        time.sleep(0.3)
        assert worker.poll() is None  # the first signal waits for the running tasks
        worker.send_signal(signal.SIGTERM)
        code, _, err = finish(worker, timeout=15)
    finally:
        worker.kill()
    assert code == 1 and "stopped at once by a second SIGTERM" in err, err
    assert tags("end") == []  # at once: no task reached its end, 20 s in
    assert pool_queue().stats()["in_flight"] == 4  # their claims come back after the lease


@pytest.mark.parametrize("pool", ["thread", "async"])
def test_a_pool_rides_out_a_redis_restart(
    aof_place: tuple[RedisProcess, Place],  # noqa: F811 - the fixture imported above
    pool: str,
) -> None:
    server, place = aof_place
    n = 300
    for i in range(n):
        tasks.step.enqueue(args=[f"t{i}", 0.01], id=f"t{i}")
    worker = place.spawn("--pool", pool, "--concurrency", "8", "--lease", "3")
    try:
        wait_for(lambda: len(runs_of("done")) >= 30, 30, "the drain to be under way")
        server.stop()
        time.sleep(1.0)
        server.start()
        wait_for(lambda: len(runs_of("done")) == n, 60, "every task to finish")
        assert worker.poll() is None  # still running after the outage
        worker.send_signal(signal.SIGTERM)
        code, _, err = finish(worker)
    finally:
        worker.kill()
    assert code == 0, err
    assert "Redis is unreachable" in err and "Redis answers again" in err
    stats = queues["default"].queue("claims").stats()
    assert (stats["ready"], stats["in_flight"], stats["dead"]) == (0, 0, 0)
