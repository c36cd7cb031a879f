"""Claims and failures with real ``drain_queue`` processes.

A task that kills its worker costs only itself; a worker whose lease was lost
leaves the rest of its batch to the worker that has it; per-task
``max_attempts`` holds when a lease expires; a worker rides out a Redis restart
and a SIGKILL of Redis. Every test runs on the real single server and the
cluster (fakeredis cannot be shared between processes), except the outage
tests, which restart a server of their own.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.test import override_settings

from django_redislock import queues
from django_redislock.queue import Queue

from .conftest import RedisTarget
from .processes import OUTAGE_OPTIONS, finish, own_queue_server, wait_for
from .servers import RedisProcess
from .testapp import tasks

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow
#: The alias's MAX_ATTEMPTS in these tests (small, so dead-lettering shows quickly).
MAX_ATTEMPTS = 2


class Place:
    """Where the workers of a test connect: location and OPTIONS (also set in this process)."""

    def __init__(self, location: str | list[str], options: dict[str, Any]) -> None:
        self.location = location
        self.options = options

    def spawn(self, *args: str) -> subprocess.Popen[str]:
        location = self.location if isinstance(self.location, str) else self.location[0]
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "tests.queue_worker_settings",
            "REDISLOCK_TEST_URL": location,
            "REDISLOCK_TEST_OPTIONS": json.dumps(self.options),
            "PYTHONPATH": str(ROOT),
            "PYTHONUNBUFFERED": "1",
        }
        return subprocess.Popen(
            [sys.executable, "-m", "django", "drain_queue", "claims", *args],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )


@pytest.fixture(params=["single", "cluster"])
def place(request: pytest.FixtureRequest) -> Iterator[Place]:
    target: RedisTarget = request.getfixturevalue(f"{request.param}_target")
    options = {**target.options, "MAX_ATTEMPTS": MAX_ATTEMPTS}
    params = {**target.params(), "KEY_PREFIX": "test", "OPTIONS": options}
    with override_settings(REDISLOCK_QUEUES={"default": params}):
        yield Place(target.location, options)


def claims_queue() -> Queue:
    found: Queue = queues["default"].queue("claims")
    return found


def runs_of(kind: str) -> Counter[str]:
    """How often each tag has a run record ``kind:tag[:pid]``."""
    return Counter(r.split(":")[1] for r in tasks.runs() if r.startswith(f"{kind}:"))


def drain_until_empty(place: Place, *args: str, rounds: int = 8) -> int:
    """Run burst workers one after another until nothing is pending or in flight."""
    q = claims_queue()
    for spawned in range(1, rounds + 1):
        finish(place.spawn("--burst", "--timeout", "20", *args))
        stats = q.stats()
        if stats["in_flight"]:  # a killed worker's claims: wait for their lease to end
            time.sleep(1.2)
            q.claim(0)  # hands the expired leases back (as a worker's next claim would)
            stats = q.stats()
        if stats["ready"] + stats["delayed"] + stats["in_flight"] == 0:
            return spawned
    raise AssertionError(f"the queue was not empty after {rounds} workers: {q.stats()}")


def test_a_task_that_kills_its_worker_costs_only_itself(place: Place) -> None:
    for i in range(5):
        tasks.step.enqueue(args=[f"g{i}"], id=f"g{i}")
    tasks.kills_worker.enqueue(args=["bad"], id="bad")
    for i in range(5, 10):
        tasks.step.enqueue(args=[f"g{i}"], id=f"g{i}")
    drain_until_empty(place, "--batch", "11", "--lease", "1")
    q = claims_queue()
    done = runs_of("done")
    assert sorted(done) == [f"g{i}" for i in range(10)]  # every good task finished
    assert [t.id for t in q.tasks("dead")] == ["bad"]
    assert q.tasks("dead")[0].attempts == MAX_ATTEMPTS
    # the killer ran its recorded attempts, plus at most the one run before it was a suspect
    assert MAX_ATTEMPTS <= runs_of("kill")["bad"] <= MAX_ATTEMPTS + 1
    # a good task runs again only when its worker died before its ack was sent
    assert max(runs_of("run").values()) <= 2


@pytest.mark.parametrize(
    ("fn", "limit"), [(tasks.kills_worker_once, 1), (tasks.kills_worker_thrice, 3)]
)
def test_a_task_max_attempts_holds_when_its_lease_expires(
    place: Place, fn: Any, limit: int
) -> None:
    fn.enqueue(args=["k"], id="k")
    drain_until_empty(place, "--batch", "5", "--lease", "1")
    [dead] = claims_queue().tasks("dead")
    assert (dead.id, dead.attempts) == ("k", limit)
    assert runs_of("kill")["k"] == limit  # its own limit, not the alias's MAX_ATTEMPTS (2)


def test_a_worker_that_lost_its_lease_leaves_the_batch_to_the_new_holder(place: Place) -> None:
    tasks.step.enqueue(args=["slow", 4.0], id="slow")
    for i in range(4):
        tasks.step.enqueue(args=[f"n{i}"], id=f"n{i}")
    first = place.spawn("--batch", "5", "--lease", "1", "--timeout", "12")
    try:
        wait_for(lambda: runs_of("run")["slow"] == 1, 30, "the slow task to start")
        # the first worker stalls (a live run's lease is renewed for as long as it runs, so
        # only a stalled or dead worker loses it): the batch expires and the second worker
        # claims it (n0-n3 first: same score, ids in byte order)
        first.send_signal(signal.SIGSTOP)
        try:
            time.sleep(2.5)
            second = place.spawn("--batch", "5", "--lease", "5", "--burst", "--timeout", "20")
            wait_for(
                lambda: all(runs_of("run")[f"n{i}"] == 1 for i in range(4)), 30, "n0-n3 to run"
            )
        finally:
            first.send_signal(signal.SIGCONT)
        code, out, err = finish(second)
        assert code == 0, err
        code, out, err = finish(first)
        assert code == 0, err
    finally:
        first.kill()
    runs = runs_of("run")
    assert [runs[f"n{i}"] for i in range(4)] == [1, 1, 1, 1], tasks.runs()
    assert "processed 1," in out  # the first worker ran the slow task only
    stats = claims_queue().stats()
    assert stats["ready"] + stats["in_flight"] + stats["dead"] == 0


def test_a_replaced_task_is_never_touched_by_the_old_run(place: Place) -> None:
    # each copy runs until the test lets it go: the old copy used to run 5 s, and a loaded
    # machine could take longer than that to start the second worker (an event, not a race)
    tasks.step_until.enqueue(args=["old"], id="r")
    first = place.spawn("--batch", "1", "--lease", "10", "--timeout", "60", "--max-tasks", "1")
    second = None
    try:
        wait_for(lambda: runs_of("run")["old"] == 1, 30, "the old copy to start")
        tasks.step_until.enqueue(args=["new"], id="r", replace=True)
        second = place.spawn("--batch", "1", "--lease", "10", "--max-tasks", "1")
        wait_for(lambda: runs_of("run")["new"] == 1, 60, "the new copy to start")
        assert runs_of("done") == Counter()  # both copies are running now
        tasks.let_go("old")
        code, _, err = finish(first)  # the old run ends and acks its own claim: lost
        assert code == 0, err
        q = claims_queue()
        held = q.get("r")
        assert held is not None and held.state == "in_flight"  # the new run still holds it
        assert held.payload["args"] == ["new"]
        assert runs_of("done") == Counter({"old": 1})
        tasks.let_go("new")
        code, _, err = finish(second)
        assert code == 0, err
    finally:
        tasks.let_go("old")
        tasks.let_go("new")
        first.kill()
        if second is not None:
            second.kill()
    assert runs_of("done") == Counter({"old": 1, "new": 1})
    assert claims_queue().get("r") is None


# -- Redis outages: a server of its own, persisted with AOF -------------------------------


@pytest.fixture
def aof_place(tmp_path: Path) -> Iterator[tuple[RedisProcess, Place]]:
    with own_queue_server(tmp_path) as server:
        yield server, Place(server.url, OUTAGE_OPTIONS)


@pytest.mark.parametrize("how", ["restart", "sigkill"])
def test_workers_ride_out_a_redis_outage(aof_place: tuple[RedisProcess, Place], how: str) -> None:
    server, place = aof_place
    n = 300
    for i in range(n):
        tasks.step.enqueue(args=[f"t{i}", 0.01], id=f"t{i}")
    workers = [place.spawn("--batch", "10", "--lease", "3") for _ in range(2)]
    pids = {str(w.pid) for w in workers}

    def both_under_way() -> bool:
        # both workers have run a task: this test is about running workers (one that
        # starts during an outage has its own test below)
        ran = {r.split(":")[2] for r in tasks.runs() if r.startswith("run:")}
        return len(runs_of("done")) >= 30 and pids <= ran

    try:
        wait_for(both_under_way, 60, "the drain to be under way in both workers")
        if how == "restart":
            server.stop()
        else:
            server.kill()
        time.sleep(1.0)
        server.start()
        wait_for(lambda: len(runs_of("done")) == n, 60, "every task to finish")
        exited = [finish(w) for w in workers if w.poll() is not None]
        assert not exited, exited  # still running after the outage (else: code, out, err)
        for w in workers:
            w.send_signal(signal.SIGTERM)
        results = [finish(w) for w in workers]
    finally:
        for w in workers:
            w.kill()
    for code, _, err in results:
        assert code == 0, err
        assert "Redis is unreachable" in err and "Redis answers again" in err
    stats = claims_queue().stats()
    assert (stats["ready"], stats["in_flight"], stats["dead"]) == (0, 0, 0)


def test_a_worker_started_during_an_outage_waits_for_redis(
    aof_place: tuple[RedisProcess, Place],
) -> None:
    # a worker that comes up before its server (a container started first, a restart of
    # both) rides the outage out as a running worker does, instead of exiting at once
    server, place = aof_place
    tasks.step.enqueue(args=["early", 0], id="early")
    server.stop()
    worker = place.spawn("--give-up", "120")
    try:
        assert worker.stderr is not None
        lines = [worker.stderr.readline()]
        while lines[-1] and "Redis is unreachable" not in lines[-1] and len(lines) < 50:
            lines.append(worker.stderr.readline())
        assert "Redis is unreachable" in lines[-1], lines
        assert worker.poll() is None
        server.start()
        wait_for(lambda: runs_of("done") == {"early": 1}, 60, "the task queued before to run")
        worker.send_signal(signal.SIGTERM)
        code, _, err = finish(worker)
    finally:
        worker.kill()
    assert code == 0, err
    assert "Redis answers again" in err


def test_a_worker_gives_up_after_its_give_up_time(
    aof_place: tuple[RedisProcess, Place],
) -> None:
    server, place = aof_place
    worker = place.spawn("--give-up", "1.5")
    try:
        assert worker.stdout is not None
        assert worker.stdout.readline().startswith("Draining queue claims")
        server.kill()
        started = time.monotonic()
        code, _, err = finish(worker)
    finally:
        worker.kill()
    assert code != 0
    assert "longer than the worker's give-up time of 1.5s" in err
    assert 1.4 < time.monotonic() - started < 15


def test_a_second_signal_forces_the_stop(place: Place) -> None:
    tasks.step.enqueue(args=["long", 20], id="long")
    worker = place.spawn("--batch", "1", "--lease", "30")
    try:
        wait_for(lambda: runs_of("run")["long"] == 1, 30, "the long task to start")
        worker.send_signal(signal.SIGINT)
        time.sleep(0.5)
        assert worker.poll() is None  # the first signal waits for the running task
        worker.send_signal(signal.SIGINT)
        stopped = time.monotonic()
        code, _, err = finish(worker)
    finally:
        worker.kill()
    assert code != 0
    assert "stopped at once by a second SIGINT" in err
    assert time.monotonic() - stopped < 5
