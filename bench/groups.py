"""Concurrency groups: group-fair claiming (issue 29, item 4).

One tenant queues a backlog of ``BIG`` tasks, then 9 other tenants queue 10 each (the worst
order for them); one ``solo`` worker in this process drains the queue
(``Worker(burst=True)``, claims of 100). Each task notes its tenant when it starts. The
figure is where in the run the 90 small tasks had all started: the position of the last of
them among all starts, and the time of its start as a fraction of the run's time. With
``@task(group_key=tenant, group_concurrency=2)`` the groups take turns; the same tasks
without a group run in queue order (FIFO), which is the baseline. The issue's target: all 90
within the first 5 % of the run with ``BIG`` = 100,000.

``BIG`` defaults to 20,000 (a run of well under a minute on a 2-core machine) and 2,000 with
``--quick``; ``BENCH_GROUPS_BIG=100000`` sets it (and ``BENCH_GROUPS_ROUNDS`` the rounds, 3).
"""

from __future__ import annotations

import os
import time
from typing import Any, cast

from django.test import override_settings

from bench.common import LoadAverage, between, median, rotated, spread

SMALL_TENANTS, SMALL_TASKS = 9, 10


def one_run(big: int, grouped: bool) -> dict[str, float]:
    from bench import group_tasks
    from django_redislock import queues
    from django_redislock.backends.redis import RedisQueueBackend
    from django_redislock.queue.worker import Worker

    fn = group_tasks.grouped if grouped else group_tasks.plain
    q = queues["default"].queue("bench-groups")
    q.purge()
    fn.enqueue_many([(("big",), {}) for _ in range(big)])
    fn.enqueue_many(
        [((f"small{t}",), {}) for t in range(SMALL_TENANTS) for _ in range(SMALL_TASKS)]
    )
    group_tasks.STARTED.clear()
    began = time.monotonic()
    Worker([q], burst=True, batch=100).run()
    ended = time.monotonic()
    starts = group_tasks.STARTED
    total = big + SMALL_TENANTS * SMALL_TASKS
    assert len(starts) == total, (len(starts), total)
    last = max(i for i, (tenant, _) in enumerate(starts) if tenant != "big")
    q.purge()
    # forget_queue is the Redis backend's, not the base contract's
    cast(RedisQueueBackend, queues["default"]).forget_queue("bench-groups")
    return {
        "position": (last + 1) / total,
        "time": (starts[last][1] - began) / (ended - began),
        "seconds": ended - began,
        "tasks/s": total / (ended - began),
    }


CASES = {True: "group_key=tenant, group_concurrency=2", False: "no groups (FIFO)"}


def run(server: Any, quick: bool) -> dict[str, Any]:
    big = int(os.environ.get("BENCH_GROUPS_BIG", "2000" if quick else "20000"))
    rounds = int(os.environ.get("BENCH_GROUPS_ROUNDS", "1" if quick else "3"))
    loads = LoadAverage()
    found: dict[bool, list[dict[str, float]]] = {True: [], False: []}
    params = {"LOCATION": server.url, "KEY_PREFIX": "bench"}
    with override_settings(REDISLOCK_QUEUES={"default": params}):
        for n in range(rounds):
            for grouped in rotated(list(CASES), n):
                found[grouped].append(one_run(big, grouped))
            loads.sample()
    rows = []
    for grouped, case in CASES.items():
        runs = found[grouped]
        share = [100 * r["time"] for r in runs]
        rates = [r["tasks/s"] for r in runs]
        rows.append(
            {
                "case": case,
                "tasks": big + SMALL_TENANTS * SMALL_TASKS,
                "last small task started at (% of starts)": 100
                * median(r["position"] for r in runs),
                "(% of the run's time, median)": median(share),
                "(% of the run's time, range)": between(share, ".2f"),
                "run seconds": median(r["seconds"] for r in runs),
                "tasks/s (median)": median(rates),
                "tasks/s (range)": between(rates),
            }
        )
    first = rows[0]["(% of the run's time, median)"]
    slower = [p["tasks/s"] / g["tasks/s"] for g, p in zip(found[True], found[False], strict=True)]
    return {
        "name": "groups",
        "columns": list(rows[0]),
        "rows": rows,
        "plots": ["last small task started at (% of starts)", "(% of the run's time, median)"],
        "notes": [
            f"1 tenant with {big:,} tasks queued first, then {SMALL_TENANTS} tenants with "
            f"{SMALL_TASKS} each; one solo worker in this process (Worker(burst=True, "
            f"batch=100)), the tasks queued with enqueue_many; {rounds} interleaved round(s) "
            f"(the cases' order rotated each round), medians of the rounds with their range. "
            f"{loads.note()}.",
            f"With groups the {SMALL_TENANTS * SMALL_TASKS} small tasks had all started "
            f"{first:.2f} % into the run (target: within 5 % at 100,000 tasks). The plain "
            f"drain's rate over the grouped one's, within a round: {spread(slower)}.",
            "Reproduce: python3 dev.py bench groups (BENCH_GROUPS_BIG=100000: the issue's size).",
        ],
    }
