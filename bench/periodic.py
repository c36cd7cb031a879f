"""Scheduler precision: how late each tick reaches the queue, with 3 schedulers running.

Three :class:`~django_redislock.periodic.Scheduler` threads (one leads, two stand by) run an
``every`` schedule for a while; lateness is measured by Redis itself: the queued task's score
(Redis ``TIME`` when the script queued it) minus its tick. Also counted: ticks queued more
than once (must be 0) and ticks missing between the first and the last.
"""

from __future__ import annotations

import threading
from datetime import datetime, timedelta
from typing import Any

from django.test import override_settings

from bench.common import percentile
from django_redislock import queues
from django_redislock.periodic import Scheduler
from django_redislock.periodic.scheduler import LEADER_TTL
from django_redislock.periodic.schedules import SECOND, schedule, to_micros

COLUMNS = ["schedule", "ticks", "duplicates", "missing", "p50 ms", "p99 ms", "max ms"]
TASK = "tests.testapp.tasks.remember"


def lateness(name: str, queue: Any, every: int) -> tuple[list[float], int, int, int]:
    """Lateness in ms per queued tick of ``name``; duplicates, distinct and missing ticks."""
    prefix = f"periodic:{name}:"
    tasks = [task for task in queue.tasks(count=5000) if task.id.startswith(prefix)]
    ticks = [
        to_micros(datetime.fromisoformat(task.id[len(prefix) :].replace("Z", "+00:00")))
        for task in tasks
    ]
    # the first tick is the one a starting scheduler catches up (up to one interval late):
    # it measures the start, not the precision
    first = min(ticks, default=0)
    late = [
        (task.score - tick) / 1000 for task, tick in zip(tasks, ticks, strict=True) if tick != first
    ]
    distinct = set(ticks)
    span = (max(distinct) - min(distinct)) // every + 1 if distinct else 0
    return late, len(ticks) - len(distinct), len(distinct), span - len(distinct)


def one_row(name: str, every: float, seconds: float) -> dict[str, Any]:
    """Run 3 schedulers for ``seconds`` on an ``every`` schedule; its row."""
    item = schedule(name, TASK, every=timedelta(seconds=every), args=[name])
    schedulers = [Scheduler([item]) for _ in range(3)]
    threads = [
        threading.Thread(target=s.run, kwargs={"timeout": seconds}, daemon=True) for s in schedulers
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(seconds + 15)
    queue = queues["default"].queue("tests")
    late, duplicates, distinct, missing = lateness(name, queue, round(every * SECOND))
    return {
        "schedule": f"every {every:g} s, 3 schedulers, {seconds:g} s",
        "ticks": distinct,
        "duplicates": duplicates,
        "missing": missing,
        "p50 ms": percentile(late, 50),
        "p99 ms": percentile(late, 99),
        "max ms": max(late, default=float("nan")),
    }


def run(server: Any, quick: bool) -> dict[str, Any]:
    seconds = 5.0 if quick else 20.0
    alias = {"default": {"LOCATION": server.url, "KEY_PREFIX": "bench"}}
    with override_settings(REDISLOCK_QUEUES=alias, REDISLOCK_LOCKS=alias):
        queues["default"].client.flushall()  # type: ignore[attr-defined]
        rows = [one_row("sec", 1.0, seconds), one_row("tenth", 0.1, seconds)]
    return {
        "name": "periodic",
        "columns": COLUMNS,
        "rows": rows,
        "plots": ["p50 ms", "p99 ms"],
        "notes": [
            "Lateness is the queued task's score (Redis TIME inside the enqueue script) minus "
            "its tick: the leader's wake-up overshoot, one TIME and one HGET, the script. The "
            "first tick of a run (queued when the schedulers start) is left out.",
            f"The leader sleeps until the next tick (at most {LEADER_TTL / 3:.1f} s at a time, "
            "to renew its lock); the standbys wait on the lock, woken by its release.",
        ],
    }
