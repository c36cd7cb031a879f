"""Chords with real ``drain_queue`` processes: two workers finishing members at the same
time over 200 chords in flight at once (one worker SIGKILLed from outside mid-way), a worker
SIGKILLed by its own member mid-chord, retried members (single server and cluster)."""

from __future__ import annotations

import signal
import subprocess
import time
from collections import Counter
from collections.abc import Iterator

import pytest
from django.test import override_settings

from django_redislock import chord, group, queues
from django_redislock.queue import Queue
from django_redislock.queue.canvas import WorkflowHandle
from django_redislock.queue.workers import list_workers

from . import workflow_tasks as wt
from .conftest import RedisTarget
from .processes import finish, spawn, wait_for

pytestmark = pytest.mark.slow
#: Chords of the concurrent-ends run (all in flight at once) and members per chord: small
#: chords, so the run stays short while 200 callbacks each race their last two members' ends.
CHORDS, MEMBERS = 200, 4
#: Members per chord of the other tests.
WIDE = 8


@pytest.fixture(params=["single", "cluster"])
def real(request: pytest.FixtureRequest) -> Iterator[RedisTarget]:
    target: RedisTarget = request.getfixturevalue(f"{request.param}_target")
    params = {**target.params(), "KEY_PREFIX": "test"}
    with override_settings(REDISLOCK_QUEUES={"default": params}):
        queues["default"].queue("wf").purge()
        queues["default"].client.delete(wt.RUNS_KEY)  # type: ignore[attr-defined]
        yield target


def wf() -> Queue:
    found: Queue = queues["default"].queue("wf")
    return found


def workers(real: RedisTarget, count: int, *args: str) -> list[subprocess.Popen[str]]:
    return [
        spawn(real, "wf", "--lease", "2", *args, task_modules=["tests.workflow_tasks"])
        for _ in range(count)
    ]


def stop(procs: list[subprocess.Popen[str]]) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for proc in procs:
        finish(proc, timeout=30)


def callbacks() -> Counter[str]:
    return Counter(r.split(":")[1] for r in wt.runs() if r.startswith("collect:"))


def all_ended(handles: list[WorkflowHandle]) -> bool:
    return all(h.state != "RUNNING" for h in handles)


def test_chord_callback_runs_once_with_two_workers_finishing_members_together(
    real: RedisTarget,
) -> None:
    """200 chords sent at once, drained by two workers taking one task at a time (a chord's
    members alternate between them, so its last ends race); a quarter of the way in, one
    worker is SIGKILLed from outside and another takes its place: its task in flight comes
    back when its lease expires, and is counted once. Every callback is queued once: it
    runs once, except the one the killed worker may have been running (at-least-once: once
    in the killed worker, once after)."""
    procs = workers(real, 2, "--batch", "1")
    started = list(procs)
    try:
        backend = queues["default"]
        wait_for(
            lambda: list_workers(backend).total >= 2,  # type: ignore[arg-type]
            60,
            "both workers to start",
        )
        handles = [
            chord(
                group(wt.square.s(i, 0.002) for i in range(MEMBERS)), wt.gather.s(f"k{n}")
            ).delay()
            for n in range(CHORDS)
        ]
        wait_for(lambda: len(gathered()) >= CHORDS // 4, 120, "a quarter of the chords")
        killed = str(procs[0].pid)
        procs[0].send_signal(signal.SIGKILL)  # mid-workflow: members of live chords in flight
        finish(procs[0], timeout=30)
        started += workers(real, 1, "--batch", "1")
        wait_for(lambda: all_ended(handles), 180, "every chord to end")
        # the killed worker's last task may have ended (counted) before its ack, which
        # goes with a worker's next claim: its lease expires and it runs again, uncounted
        wait_for(lambda: not sum(wf().stats()[s] for s in ("ready", "in_flight")), 60, "a drain")
    finally:
        stop(started)
    expected = sum(i * i for i in range(MEMBERS))
    assert [h.result(1) for h in handles] == [expected] * CHORDS
    runs = gathered()
    assert sorted(runs) == sorted(f"k{n}" for n in range(CHORDS))  # every callback ran
    twice = {tag: pids for tag, pids in runs.items() if len(pids) > 1}
    assert len(twice) <= 1, twice  # only the killed worker's task in flight ran again
    for ran in twice.values():
        assert len(ran) == 2 and ran[0] == killed and ran[1] != killed
    pids = Counter(r.split(":")[2] for r in wt.runs() if r.startswith("square:"))
    assert sum(pids.values()) >= CHORDS * MEMBERS  # a member killed mid-run ran again
    assert len(pids) >= 2  # two workers ran members at a time: their ends raced


def gathered() -> dict[str, list[str]]:
    """Each chord's callback runs (``gather``): the pids of the workers that ran it."""
    out: dict[str, list[str]] = {}
    for entry in wt.runs():
        if entry.startswith("gather:"):
            _, tag, pid = entry.split(":")
            out.setdefault(tag, []).append(pid)
    return out


def test_chord_survives_a_sigkilled_worker_and_counts_the_rerun_once(real: RedisTarget) -> None:
    handles = []
    for n in range(5):
        members = [wt.square.s(i) for i in range(WIDE - 1)] + [wt.die_once.s(7, f"d{n}")]
        handles.append(chord(members, wt.collect.s(f"d{n}")).delay())
    procs = workers(real, 2, "--batch", "1")
    started = list(procs)
    try:
        deadline = time.monotonic() + 120
        while not all_ended(handles):  # bounded: the deadline
            assert time.monotonic() < deadline, f"chords still running: {wf().stats()}"
            for i, proc in enumerate(procs):
                if proc.poll() is not None:  # killed by its task: start another in its place
                    procs[i] = workers(real, 1, "--batch", "1")[0]
                    started.append(procs[i])
            time.sleep(0.1)
    finally:
        stop(started)
    deaths = [r for r in wt.runs() if r.startswith("die:") and r.endswith(":1")]
    assert len(deaths) == 5  # each chord lost a worker mid-way
    expected = sum(i * i for i in range(WIDE - 1)) + 49
    assert [h.result(1) for h in handles] == [expected] * 5
    assert callbacks() == Counter({f"d{n}": 1 for n in range(5)})


def test_retried_members_are_counted_by_their_final_outcome(real: RedisTarget) -> None:
    handles = [
        chord([wt.flaky.s(i, f"f{n}") for i in range(4)], wt.collect.s(f"f{n}")).delay()
        for n in range(10)
    ]
    procs = workers(real, 2, "--batch", "1")
    try:
        wait_for(lambda: all_ended(handles), 120, "every chord to end")
    finally:
        stop(procs)
    assert [h.result(1) for h in handles] == [14] * 10
    assert callbacks() == Counter({f"f{n}": 1 for n in range(10)})
    flaky_runs = [r for r in wt.runs() if r.startswith("flaky:")]
    assert len(flaky_runs) == 10 * 4 * 2  # each member failed once, then succeeded
