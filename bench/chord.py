"""Chord benchmark: a 1,000-member chord's completion time and Redis round trips per member.

On one private server:

* django-redislock: ``chord(group(member.s(i) for i in range(N)), total.s()).delay()``,
  drained by one ``solo`` worker in this process (``Worker(burst=True)``, batches of 100);
  timed from the ``delay`` to the callback's result read by the handle. Round trips are
  the requests redis-py sent (:func:`bench.common.round_trips`, the enqueue, the worker's
  claims, acks, member ends and the handle's reads), per member; beside them the same for
  a plain group of N ``enqueue_many`` calls of the same task drained the same way (no
  workflow), so the difference is what the chord costs per member;
* Celery (when installed): the same chord with the Redis broker and the Redis result
  backend (a chord needs one), its ``--pool solo`` worker in a subprocess started before
  the timing; timed from ``apply_async`` to the callback's ``get()``. Only the server's
  command count can be compared (its worker is another process): "server commands per
  member" is ``INFO commandstats`` over the run, for both libraries.

Each run takes its turn in each of :data:`ROUNDS` rounds (the order rotated each round);
figures are medians with their range, Celery's time over ours taken within a round.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import redis
from django.test import override_settings

from bench.common import (
    CommandCounter,
    LoadAverage,
    between,
    median,
    rotated,
    round_trips,
    spread,
)

ROOT = Path(__file__).resolve().parent.parent
ROUNDS = 3


def has_celery() -> bool:
    try:
        import celery  # noqa: F401
    except ImportError:
        return False
    return True


def redislock_chord(n: int, counter: CommandCounter) -> dict[str, float]:
    from bench import chord_tasks
    from django_redislock import chord, group, queues
    from django_redislock.queue.worker import Worker

    q = queues["default"].queue("bench-chord")
    q.purge()
    counter.reset()
    with round_trips() as sent:
        began = time.perf_counter()
        workflow = chord(group(chord_tasks.member.s(i) for i in range(n)), chord_tasks.total.s())
        handle = workflow.delay()
        Worker([q], burst=True, batch=100).run()
        value = handle.result(60)
        took = time.perf_counter() - began
    assert value == sum(range(n)), value
    return {"seconds": took, "trips": sent[0] / n, "commands": counter.total() / n}


def redislock_plain(n: int, counter: CommandCounter) -> dict[str, float]:
    from bench import chord_tasks
    from django_redislock import queues
    from django_redislock.queue.worker import Worker

    q = queues["default"].queue("bench-chord")
    q.purge()
    counter.reset()
    with round_trips() as sent:
        began = time.perf_counter()
        chord_tasks.member.enqueue_many(((i,), {}) for i in range(n))
        Worker([q], burst=True, batch=100).run()
        took = time.perf_counter() - began
    return {"seconds": took, "trips": sent[0] / n, "commands": counter.total() / n}


def celery_chord(app: Any, n: int, counter: CommandCounter) -> dict[str, float]:
    from celery import chord as celery_chord_

    member = app.tasks["bench.chord.member"]
    total = app.tasks["bench.chord.total"]
    counter.reset()
    began = time.perf_counter()
    result = celery_chord_(member.s(i) for i in range(n))(total.s())
    value = result.get(timeout=300)
    took = time.perf_counter() - began
    assert value == sum(range(n)), value
    return {"seconds": took, "trips": float("nan"), "commands": counter.total() / n}


def run(server: Any, quick: bool) -> dict[str, Any]:
    n = 100 if quick else 1000
    url = server.url
    counter = CommandCounter(redis.Redis.from_url(url))
    rows: list[dict[str, Any]] = []
    notes: list[str] = []
    samples: dict[str, list[dict[str, float]]] = {"redislock chord": [], "redislock plain": []}
    worker = None
    app = None
    if has_celery():
        from bench.chord_tasks import celery_app

        app = celery_app(url)
        samples["celery chord"] = []
        env = {**os.environ, "BENCH_CHORD_CELERY_URL": url, "PYTHONPATH": str(ROOT)}
        worker = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "bench.chord_tasks",
                "worker",
                "--pool",
                "solo",
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
                "--loglevel",
                "WARNING",
            ],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(3)  # its start-up, not timed
    else:
        notes.append("celery is not installed in this environment: no Celery figures")
    params = {"LOCATION": url, "KEY_PREFIX": "bench"}
    runs = {
        "redislock chord": lambda: redislock_chord(n, counter),
        "redislock plain": lambda: redislock_plain(n, counter),
    }
    if app is not None:
        runs["celery chord"] = lambda: celery_chord(app, n, counter)
    rounds = 1 if quick else ROUNDS
    loads = LoadAverage()
    try:
        with override_settings(REDISLOCK_QUEUES={"default": params}):
            for turn in range(rounds):
                for name in rotated(list(runs), turn):
                    samples[name].append(runs[name]())
                loads.sample()
    finally:
        if worker is not None:
            worker.terminate()
            worker.wait(30)
    for name, found in samples.items():
        seconds = [r["seconds"] for r in found]
        rows.append(
            {
                "run": f"{name} of {n}",
                "completion s (median)": median(seconds),
                "completion s (range)": between(seconds, ".3f"),
                "client round trips / member": (
                    "n/a" if name.startswith("celery") else median(r["trips"] for r in found)
                ),
                "server commands / member": median(r["commands"] for r in found),
            }
        )
    notes.append(
        f"{rounds} interleaved rounds (the runs' order rotated each round); every figure is "
        f"the median of the rounds with its range. {loads.note()}."
    )
    if app is not None:
        ratios = [
            c["seconds"] / ours["seconds"]
            for c, ours in zip(samples["celery chord"], samples["redislock chord"], strict=True)
        ]
        notes.append(
            f"Celery's chord time over ours, per round: {spread(ratios)} times (median (range))."
        )
    notes.append(
        "Idiom: chord(group(member.s(i) for i in range(n)), total.s()).delay() and "
        "handle.result(), one reused solo Worker(burst=True, batch=100) in the benchmark "
        "process; round trips counted in it (enqueue, claims, acks, member ends, the "
        "handle's reads). Celery: chord(...)(total.s()) and result.get(), its --pool solo "
        "worker in a subprocess started before the timing."
    )
    notes.append("Reproduce: python3 dev.py bench chord.")
    return {
        "name": "chord",
        "columns": [
            "run",
            "completion s (median)",
            "completion s (range)",
            "client round trips / member",
            "server commands / member",
        ],
        "rows": rows,
        "plots": ["completion s (median)", "server commands / member"],
        "notes": notes,
    }
