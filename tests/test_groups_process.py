"""Concurrency groups across worker processes (issue 29, item 4), single server and cluster:
two ``drain_queue`` processes never run more than ``group_concurrency`` tasks of a group at
once, and a SIGKILLed worker's group slot comes back once its lease lapses."""

from __future__ import annotations

import signal

import pytest

from django_redislock import queues
from django_redislock.queue import Queue

from . import group_tasks as gt
from .conftest import RedisTarget
from .processes import finish, spawn, wait_for

pytestmark = pytest.mark.django_db(transaction=True)

MODULES = ["tests.group_tasks"]


def grouped() -> Queue:
    found: Queue = queues["default"].queue("grouped")
    return found


def test_two_worker_processes_never_run_more_than_the_limit(real: RedisTarget) -> None:
    for n in range(12):
        gt.tenant_work.delay("big", n, 0.15)
    for n in range(4):
        gt.tenant_work.delay("small", n, 0.05)
    workers = [
        spawn(
            real,
            "grouped",
            "--pool",
            "thread",
            "--concurrency",
            "4",
            "--burst",
            "--timeout",
            "60",
            task_modules=MODULES,
        )
        for _ in range(2)
    ]
    try:
        for worker in workers:
            code, _out, err = finish(worker, timeout=90)
            assert code == 0, err
    finally:
        for worker in workers:
            worker.kill()
    assert len(gt.seen("big")) == 12 and len(gt.seen("small")) == 4
    assert max(gt.seen("big")) <= 2 and max(gt.seen("small")) <= 2
    assert grouped().groups() == []
    stats = grouped().stats()
    assert (stats["ready"], stats["in_flight"], stats["dead"]) == (0, 0, 0)


def test_a_sigkilled_workers_slot_comes_back_after_its_lease(real: RedisTarget) -> None:
    gt.tenant_work.delay("a", 0, 60)  # its first run lasts until its worker is killed
    gt.tenant_work.delay("a", 1, 60)
    gt.tenant_work.delay("a", 2, 0)  # held: the group's two slots are taken
    args = ("grouped", "--pool", "thread", "--concurrency", "4", "--lease", "1")
    first = spawn(real, *args, task_modules=MODULES)
    try:
        wait_for(lambda: len(gt.starts()) == 2, 60, "the two long runs to start")
        assert [(g.running, g.held) for g in grouped().groups()] == [(2, 1)]
        first.send_signal(signal.SIGKILL)
        finish(first)
    finally:
        first.kill()
    gt.forget_running("a")  # the killed runs never reached their DECR
    # the dead worker's runs keep their slots until their leases lapse; then they run again
    # (quickly: a rerun does not sleep) and "a:2" gets a slot
    assert [(g.running, g.held) for g in grouped().groups()] == [(2, 1)]
    wait_for(lambda: grouped().stats()["expired_leases"] == 2, 60, "the leases to lapse")
    second = spawn(real, *args, "--burst", "--timeout", "60", task_modules=MODULES)
    try:
        code, _out, err = finish(second, timeout=90)
    finally:
        second.kill()
    assert code == 0, err
    runs = [entry.rsplit(":", 1)[0] for entry in gt.starts()]
    assert sorted(runs[:2]) == ["a:0", "a:1"] and sorted(runs[2:]) == ["a:0", "a:1", "a:2"]
    assert max(gt.seen("a")) <= 2
    assert grouped().groups() == []
    stats = grouped().stats()
    assert (stats["ready"], stats["in_flight"], stats["dead"]) == (0, 0, 0)
