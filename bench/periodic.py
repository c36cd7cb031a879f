"""Scheduler precision: how late each tick reaches the queue, with 3 schedulers running.

Three :class:`~django_redislock.periodic.Scheduler` threads (one leads, two stand by) run an
``every`` schedule for a while; lateness is measured by Redis itself: the queued task's score
(Redis ``TIME`` when the script queued it) minus its tick. Also counted: ticks queued more
than once (must be 0) and ticks missing between the first and the last. Both schedules run
in each of several rounds, their order rotated each round; figures are medians of the rounds.
"""

from __future__ import annotations

import threading
from datetime import datetime, timedelta
from typing import Any

from django.test import override_settings

from bench.common import LoadAverage, between, median, percentile, rotated
from django_redislock import queues
from django_redislock.periodic import Scheduler
from django_redislock.periodic.scheduler import LEADER_TTL
from django_redislock.periodic.schedules import SECOND, schedule, to_micros

COLUMNS = [
    "schedule",
    "ticks (all rounds)",
    "duplicates",
    "missing",
    "p50 ms (median)",
    "p50 ms (range)",
    "p99 ms (median)",
    "p99 ms (range)",
    "max ms",
]
TASK = "tests.testapp.tasks.remember"
#: (row name, interval in seconds)
SCHEDULES = (("sec", 1.0), ("tenth", 0.1))


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


def one_run(name: str, every: float, seconds: float) -> dict[str, Any]:
    """Run 3 schedulers for ``seconds`` on an ``every`` schedule named ``name``; its figures."""
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
    return {"late": late, "duplicates": duplicates, "ticks": distinct, "missing": missing}


def run(server: Any, quick: bool) -> dict[str, Any]:
    rounds, seconds = (3, 3.0) if quick else (5, 8.0)
    alias = {"default": {"LOCATION": server.url, "KEY_PREFIX": "bench"}}
    found: dict[str, list[dict[str, Any]]] = {name: [] for name, _ in SCHEDULES}
    loads = LoadAverage()
    with override_settings(REDISLOCK_QUEUES=alias, REDISLOCK_LOCKS=alias):
        queues["default"].client.flushall()  # type: ignore[attr-defined]
        for n in range(rounds):
            for name, every in rotated(SCHEDULES, n):
                # a schedule of its own per round: its ticks and its leader are the round's
                found[name].append(one_run(f"{name}{n}", every, seconds))
            loads.sample()
    rows = []
    for name, every in SCHEDULES:
        runs = found[name]
        p50 = [percentile(r["late"], 50) for r in runs]
        p99 = [percentile(r["late"], 99) for r in runs]
        rows.append(
            {
                "schedule": f"every {every:g} s, 3 schedulers, {seconds:g} s a round",
                "ticks (all rounds)": sum(r["ticks"] for r in runs),
                "duplicates": sum(r["duplicates"] for r in runs),
                "missing": sum(r["missing"] for r in runs),
                "p50 ms (median)": median(p50),
                "p50 ms (range)": between(p50, ".2f"),
                "p99 ms (median)": median(p99),
                "p99 ms (range)": between(p99, ".2f"),
                "max ms": max(max(r["late"], default=float("nan")) for r in runs),
            }
        )
    return {
        "name": "periodic",
        "columns": COLUMNS,
        "rows": rows,
        "plots": ["p50 ms (median)", "p99 ms (median)"],
        "notes": [
            f"{rounds} interleaved rounds (the schedules' order rotated each round), each "
            f"schedule {seconds:g} s a round under a name of its own; p50 and p99 are taken "
            f"within a round, then the median (range) of the rounds; ticks, duplicates and "
            f"missing are summed over the rounds (a round of the 1 s schedule has about "
            f"{seconds - 1:g} ticks measured, so its p99 is the round's latest tick). "
            f"{loads.note()}.",
            "Lateness is the queued task's score (Redis TIME inside the enqueue script) minus "
            "its tick: the leader's wake-up overshoot, one TIME and one HGET, the script. The "
            "first tick of a round (queued when the schedulers start) is left out.",
            "Idiom: schedule(name, task, every=timedelta(...)) and three Scheduler([item]).run() "
            "threads in one process (what run_scheduler runs, one per process); one leads, the "
            f"others stand by. The leader sleeps until the next tick (at most "
            f"{LEADER_TTL / 3:.1f} s at a time, to renew its lock); the standbys wait on the "
            "lock, woken by its release.",
            "Reproduce: python3 dev.py bench periodic.",
        ],
    }
