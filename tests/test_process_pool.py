"""``drain_queue --pool process``: a supervisor of forked workers, as real processes.

Every test with a pool runs on the real single server and the real cluster. The
tasks are in :mod:`tests.pool_tasks`; each records which child (pid) ran it.
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import override_settings

from django_redislock import queues
from django_redislock.queue import Queue

from . import pool_tasks
from .conftest import RedisTarget
from .processes import OUTAGE_OPTIONS, finish, own_queue_server, wait_for
from .servers import RedisProcess
from .testapp.tasks import runs

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow


class Pool:
    """Where the pools of a test connect, and how to start one."""

    def __init__(self, location: str | list[str], options: dict[str, Any]) -> None:
        self.location = location
        self.options = options

    def spawn(
        self, *args: str, concurrency: int = 2, env: dict[str, str] | None = None
    ) -> subprocess.Popen[str]:
        location = self.location
        env = {
            **os.environ,
            "REDISLOCK_TEST_TASK_MODULES": json.dumps(["tests.pool_tasks"]),
            "DJANGO_SETTINGS_MODULE": "tests.queue_worker_settings",
            "REDISLOCK_TEST_URL": location if isinstance(location, str) else location[0],
            "REDISLOCK_TEST_OPTIONS": json.dumps(self.options),
            "PYTHONPATH": str(ROOT),
            "PYTHONUNBUFFERED": "1",
            **(env or {}),
        }
        command = ["drain_queue", "pool", "--pool", "process", "--concurrency", str(concurrency)]
        return subprocess.Popen(
            [sys.executable, "-m", "django", *command, *args],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )


@pytest.fixture(params=["single", "cluster"])
def pool(request: pytest.FixtureRequest) -> Iterator[Pool]:
    target: RedisTarget = request.getfixturevalue(f"{request.param}_target")
    options = {**target.options, "MAX_ATTEMPTS": 3}
    params = {**target.params(), "KEY_PREFIX": "test", "OPTIONS": options}
    with override_settings(REDISLOCK_QUEUES={"default": params}):
        yield Pool(target.location, options)


def pool_queue() -> Queue:
    found: Queue = queues["default"].queue("pool")
    return found


def empty(q: Queue) -> bool:
    stats = q.stats()
    return stats["ready"] + stats["delayed"] + stats["in_flight"] == 0


def stop(process: subprocess.Popen[str], timeout: float = 30) -> tuple[int, str, str]:
    process.send_signal(signal.SIGTERM)
    return finish(process, timeout)


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie that nobody reaped yet counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_a_mixed_workload_runs_to_completion(pool: Pool) -> None:
    q = pool_queue()
    for n in range(40):
        pool_tasks.square.enqueue(args=[n], id=f"sq{n}")
    for i in range(20):
        pool_tasks.step.enqueue(args=[f"s{i}", 0.02], id=f"s{i}")
    for i in range(3):
        pool_tasks.always_fails.enqueue(args=[f"f{i}"], id=f"f{i}")
    process = pool.spawn("--batch", "4")
    try:
        wait_for(lambda: empty(q) and q.stats()["dead"] == 3, 60, "the queue to drain")
        code, out, err = stop(process)
    finally:
        process.kill()
    assert code == 0, err
    results = queues["default"].client.hgetall(pool_tasks.RESULTS_KEY)  # type: ignore[attr-defined]
    assert {int(k): int(v) for k, v in results.items()} == {n: n * n for n in range(40)}
    assert all(pool_tasks.count("done", f"s{i}") == 1 for i in range(20))
    assert all(pool_tasks.count("fail", f"f{i}") == 2 for i in range(3))  # max_attempts=2
    assert len(set(pool_tasks.pids("run"))) == 2  # both children worked
    assert "processed 66, failed 6, retried 3, dead 3" in out


def test_each_child_claims_its_share_of_the_batch(pool: Pool) -> None:
    # without --batch, 2 children claim 50 each: both run a gated task at once; a child
    # claiming the default 100 would hold all 60 while its first one waits
    q = pool_queue()
    for i in range(60):
        pool_tasks.gate.enqueue(args=[f"g{i}"], id=f"g{i}")
    process = pool.spawn()
    client = queues["default"].client  # type: ignore[attr-defined]
    try:
        wait_for(lambda: len(set(pool_tasks.pids("run"))) == 2, 30, "both children to start")
        client.rpush(pool_tasks.GATE_KEY, *([1] * 60))
        wait_for(lambda: empty(q), 60, "the queue to drain")
        code, _, err = stop(process)
    finally:
        client.rpush(pool_tasks.GATE_KEY, *([1] * 60))
        process.kill()
    assert code == 0, err
    assert len(set(pool_tasks.pids("done"))) == 2


def test_sigkill_of_a_child_mid_task_retries_only_that_task(pool: Pool) -> None:
    q = pool_queue()
    pool_tasks.step.enqueue(args=["long", 1.5], id="long")
    for i in range(30):
        pool_tasks.step.enqueue(args=[f"s{i}", 0.1], id=f"s{i}")
    process = pool.spawn("--batch", "1", "--lease", "2")
    try:
        wait_for(lambda: pool_tasks.pids("run", "long"), 30, "the long task to start")
        victim = pool_tasks.pids("run", "long")[0]
        time.sleep(1.0)  # the lease keeper records the run's start a third of a lease in
        os.kill(victim, signal.SIGKILL)
        killed_at = len(runs())
        wait_for(lambda: len(pool_tasks.pids("run", "long")) == 2, 30, "the long task's rerun")
        rerun = q.get("long")
        assert rerun is not None and rerun.attempts == 2  # the killed run was charged once
        wait_for(lambda: empty(q), 60, "the queue to drain")
        code, _, err = stop(process)
    finally:
        process.kill()
    assert code == 0, err
    assert pool_tasks.count("done", "long") == 1
    assert all(pool_tasks.count("done", f"s{i}") == 1 for i in range(30))  # nothing lost or rerun
    after = [int(r.split(":")[2]) for r in runs()[killed_at:] if r.startswith("done:")]
    assert victim not in after and not alive(victim)
    assert len(set(after)) == 2  # the survivor kept working, and a new child took over
    assert "was killed by SIGKILL" in err


def test_sigterm_gives_unstarted_claims_back_at_once(pool: Pool) -> None:
    q = pool_queue()
    for i in range(10):
        pool_tasks.step.enqueue(args=[f"s{i}", 1.0], id=f"s{i}")
    process = pool.spawn("--batch", "5")
    try:
        wait_for(lambda: len(pool_tasks.pids("run")) == 2, 30, "both children to start a task")
        started = {r.split(":")[1] for r in runs() if r.startswith("run:")}
        process.send_signal(signal.SIGTERM)
        stopped_at = time.monotonic()
        code, out, err = finish(process)
    finally:
        process.kill()
    assert code == 0, err
    assert time.monotonic() - stopped_at < 5  # the running tasks' rest (< 1 s), not 4 more
    assert {r.split(":")[1] for r in runs() if r.startswith("done:")} == started
    stats = q.stats()
    assert (stats["ready"], stats["in_flight"]) == (8, 0)  # ready now, not after a lease
    assert all(t.attempts == 0 for t in q.top(10))
    assert "processed 2, failed 0, retried 0, dead 0, released 8" in out


def test_burst_pool_exits_by_itself_when_nothing_is_due(pool: Pool) -> None:
    for i in range(12):
        pool_tasks.step.enqueue(args=[f"s{i}", 0.05], id=f"s{i}")
    code, out, err = finish(pool.spawn("--burst", "--batch", "2"), timeout=60)
    assert code == 0, err
    assert all(pool_tasks.count("done", f"s{i}") == 1 for i in range(12))
    assert "processed 12, failed 0" in out
    assert empty(pool_queue())


def test_children_stop_gracefully_when_the_supervisor_is_killed(pool: Pool) -> None:
    q = pool_queue()
    for i in range(10):
        pool_tasks.step.enqueue(args=[f"s{i}", 1.0], id=f"s{i}")
    process = pool.spawn("--batch", "5")
    try:
        wait_for(lambda: len(pool_tasks.pids("run")) == 2, 30, "both children to start a task")
        children = pool_tasks.pids("run")
        process.kill()
        finish(process)
        wait_for(lambda: not any(alive(pid) for pid in children), 15, "the children to exit")
    finally:
        process.kill()
    assert len(pool_tasks.pids("done")) == 2  # the running tasks finished
    stats = q.stats()
    assert (stats["ready"], stats["in_flight"]) == (8, 0)  # the unstarted ones given back


def test_the_first_child_runs_the_scheduler(pool: Pool) -> None:
    schedule = {"every": 1, "task": "tests.pool_tasks.step", "args": ["tick"], "queue": "pool"}
    env = {
        "DJANGO_SETTINGS_MODULE": "tests.periodic_settings",
        "REDISLOCK_TEST_PERIODIC": json.dumps({"tick": schedule}),
        # the lock alias gets these options too, and locks have no MAX_ATTEMPTS
        "REDISLOCK_TEST_OPTIONS": json.dumps(
            {k: v for k, v in pool.options.items() if k != "MAX_ATTEMPTS"}
        ),
    }
    process = pool.spawn("--scheduler", env=env)
    try:
        try:
            wait_for(lambda: pool_tasks.count("done", "tick") >= 3, 30, "three ticks to run")
        except AssertionError as exc:
            raise AssertionError(f"{exc}: {stop(process)}") from None
        code, _, err = stop(process)
    finally:
        process.kill()
    assert code == 0, err
    assert pool_queue().tasks("dead") == []
    assert pool_tasks.count("run", "tick") == pool_tasks.count("done", "tick")


def test_a_stop_sent_to_every_process_at_once_is_one_stop(pool: Pool) -> None:
    """systemd's default KillMode=control-group: the children get SIGTERM twice at once."""
    q = pool_queue()
    for i in range(10):
        pool_tasks.step.enqueue(args=[f"s{i}", 1.0], id=f"s{i}")
    process = pool.spawn("--batch", "5")
    try:
        wait_for(lambda: len(pool_tasks.pids("run")) == 2, 30, "both children to start a task")
        for pid in [process.pid, *pool_tasks.pids("run")]:
            os.kill(pid, signal.SIGTERM)
        code, out, err = finish(process)
    finally:
        process.kill()
    assert code == 0, err
    assert len(pool_tasks.pids("done")) == 2  # finished, not interrupted
    assert (q.stats()["ready"], q.stats()["in_flight"]) == (8, 0)
    assert "released 8" in out


def test_a_child_stopped_on_its_own_is_replaced(pool: Pool) -> None:
    q = pool_queue()
    for i in range(6):
        pool_tasks.step.enqueue(args=[f"s{i}", 0.5], id=f"s{i}")
    process = pool.spawn("--batch", "1")
    try:
        wait_for(lambda: len(pool_tasks.pids("run")) >= 2, 30, "both children to start a task")
        first = pool_tasks.pids("run")[0]
        os.kill(first, signal.SIGTERM)
        wait_for(lambda: empty(q), 30, "the queue to drain")
        code, _, err = stop(process)
    finally:
        process.kill()
    assert code == 0, err
    assert all(pool_tasks.count("done", f"s{i}") == 1 for i in range(6))
    assert len(set(pool_tasks.pids("run"))) == 3  # the stopped child's replacement worked
    assert "was stopped by a signal of its own; replacing it" in err


def test_a_second_signal_forces_and_a_stubborn_child_is_killed(pool: Pool) -> None:
    q = pool_queue()
    pool_tasks.step.enqueue(args=["sleeper", 60], id="sleeper")
    pool_tasks.stubborn.enqueue(args=["stubborn", 60], id="stubborn")
    process = pool.spawn("--batch", "1")
    try:
        wait_for(lambda: len(pool_tasks.pids("run")) == 2, 30, "both tasks to start")
        process.send_signal(signal.SIGTERM)
        time.sleep(0.5)
        process.send_signal(signal.SIGTERM)
        forced_at = time.monotonic()
        code, _, err = finish(process)
    finally:
        process.kill()
    took = time.monotonic() - forced_at
    assert code == 1
    assert "stopped at once by a second signal" in err
    assert 4 <= took < 20  # the stubborn child lasted until FORCE_GRACE (5 s) ended it
    assert "killed" in err
    assert not any(alive(pid) for pid in pool_tasks.pids("run"))
    assert pool_tasks.pids("done") == []
    assert q.stats()["in_flight"] == 2  # interrupted: they come back when their leases end


def test_max_tasks_per_child_recycles(pool: Pool) -> None:
    q = pool_queue()
    for i in range(30):
        pool_tasks.step.enqueue(args=[f"s{i}"], id=f"s{i}")
    process = pool.spawn("--batch", "2", "--max-tasks-per-child", "5", "-v", "2")
    try:
        wait_for(lambda: empty(q), 60, "the queue to drain")
        code, _, err = stop(process)
    finally:
        process.kill()
    assert code == 0, err
    assert all(pool_tasks.count("done", f"s{i}") == 1 for i in range(30))
    by_pid: dict[int, int] = {}
    for pid in pool_tasks.pids("done"):
        by_pid[pid] = by_pid.get(pid, 0) + 1
    assert len(by_pid) >= 6 and max(by_pid.values()) <= 5
    assert "recycled: it ran 5 tasks (--max-tasks-per-child)" in err


def test_max_memory_per_child_recycles_a_child_that_allocates(pool: Pool) -> None:
    q = pool_queue()
    pool_tasks.hog.enqueue(args=["hog", 300], id="hog")
    for i in range(10):
        pool_tasks.step.enqueue(args=[f"s{i}", 0.05], id=f"s{i}")
    process = pool.spawn("--batch", "1", "--max-memory-per-child", "250", "-v", "2")
    try:
        wait_for(lambda: empty(q), 60, "the queue to drain")
        wait_for(lambda: not alive(pool_tasks.pids("done", "hog")[0]), 30, "the hog to exit")
        code, _, err = stop(process)
    finally:
        process.kill()
    assert code == 0, err
    assert all(pool_tasks.count("done", f"s{i}") == 1 for i in range(10))
    assert "passed --max-memory-per-child" in err
    done = [entry.split(":") for entry in runs() if entry.startswith("done:")]
    hog = next(i for i, (_, tag, _pid) in enumerate(done) if tag == "hog")
    assert done[hog][2] not in [pid for _, _, pid in done[hog + 1 :]]  # its child ran no more
    assert len({pid for _, _, pid in done}) >= 2


def test_a_hung_task_is_killed_and_recorded_failed(pool: Pool) -> None:
    q = pool_queue()
    pool_tasks.hang.enqueue(args=["hung"], id="hung")
    for i in range(5):
        pool_tasks.step.enqueue(args=[f"s{i}", 0.1], id=f"s{i}")
    process = pool.spawn("--batch", "1", "--lease", "10")
    try:
        wait_for(lambda: q.stats()["dead"] == 1, 40, "the hung task to be dead")
        wait_for(lambda: empty(q), 30, "the queue to drain")
        code, _, err = stop(process)
    finally:
        process.kill()
    assert code == 0, err
    [dead] = q.tasks("dead")
    assert dead.id == "hung" and dead.attempts == 2  # max_attempts=2: two runs, two kills
    assert dead.last_error == "TimeLimitExceeded: killed after 1 s"
    first, second = pool_tasks.pids("run", "hung")
    assert first != second and not alive(first) and not alive(second)
    assert pool_tasks.count("overlap", "hung") == 0  # never in two children at once
    assert all(pool_tasks.count("done", f"s{i}") == 1 for i in range(5))
    assert err.count("ran past its time limit of 1s") == 2


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--pool", "process", "--concurrency", "0"], "--concurrency must be at least 1"),
        (["--pool", "process", "--max-tasks-per-child", "0"], "--max-tasks-per-child must be"),
        (["--pool", "process", "--max-memory-per-child", "-5"], "--max-memory-per-child must"),
        (["--concurrency", "2"], "--concurrency 2 needs --pool thread, async or process"),
        (["--max-memory-per-child", "100"], "--max-memory-per-child needs --pool process"),
        (["--pool", "process", "--max-tasks", "3"], "use --max-tasks-per-child"),
    ],
)
def test_bad_pool_options_are_command_errors(args: list[str], message: str) -> None:
    with pytest.raises(CommandError, match=message):
        call_command("drain_queue", "pool", *args)


# -- Redis outages: a server of its own, persisted with AOF ---------------------------------


@pytest.fixture
def own(tmp_path: Path) -> Iterator[tuple[RedisProcess, Pool]]:
    with own_queue_server(tmp_path) as server:
        yield server, Pool(server.url, OUTAGE_OPTIONS)


def test_the_children_ride_out_a_redis_restart(own: tuple[RedisProcess, Pool]) -> None:
    server, pool = own
    n = 200
    for i in range(n):
        pool_tasks.step.enqueue(args=[f"s{i}", 0.01], id=f"s{i}")
    process = pool.spawn("--batch", "10", "--lease", "3")
    try:
        wait_for(lambda: len(pool_tasks.pids("done")) >= 30, 30, "the drain to be under way")
        server.stop()
        time.sleep(1.0)
        server.start()
        wait_for(lambda: empty(pool_queue()), 60, "every task to finish")
        assert process.poll() is None  # the pool is still running
        code, _, err = stop(process)
    finally:
        process.kill()
    assert code == 0, err
    assert "Redis is unreachable" in err and "Redis answers again" in err
    assert "was killed" not in err and "exited with" not in err  # no child died
    assert {f"s{i}" for i in range(n)} <= {r.split(":")[1] for r in runs() if "done:" in r}


def test_the_pool_gives_up_with_its_workers(own: tuple[RedisProcess, Pool]) -> None:
    server, pool = own
    process = pool.spawn("--give-up", "1.5")
    try:
        assert process.stdout is not None
        assert process.stdout.readline().startswith("Draining queue pool")
        time.sleep(0.5)  # the children are idle in BLPOP
        server.kill()
        killed_at = time.monotonic()
        code, _, err = finish(process)
    finally:
        process.kill()
    assert code == 1
    assert "longer than the worker's give-up time of 1.5s" in err
    assert "the process pool stopped: Redis stayed unreachable" in err
    assert 1.4 < time.monotonic() - killed_at < 20


def test_every_child_registers_in_the_workers_registry(pool: Pool) -> None:
    def listed() -> list[dict[str, Any]]:
        out = io.StringIO()
        call_command("list_workers", "--json", stdout=out)
        workers: list[dict[str, Any]] = json.loads(out.getvalue())["workers"]
        return workers

    process = pool.spawn()
    try:
        wait_for(lambda: len(listed()) == 2, 30, "both children to register")
        pids = {worker["pid"] for worker in listed()}
        code, _, err = stop(process)
    finally:
        process.kill()
    assert code == 0, err
    assert len(pids) == 2 and process.pid not in pids  # the children, not the supervisor
