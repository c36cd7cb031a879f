"""Read the numbers of every queue and lock alias, in a fixed number of round trips.

Per queue alias: one ``SMEMBERS`` of the queue list, then one ``metrics_queue``
script per queue in one pipeline (one request per master on a Cluster). Per
lock alias: one pipeline over the lock index buckets (``held_lock_count``).
Every script is counts and first members of sorted sets, never a scan, so a
scrape costs the same with a million queued tasks as with ten.

An alias whose Redis does not answer is reported with
``redislock_backend_up 0`` and skipped; the other aliases are still exported.
"""

from __future__ import annotations

import time
from typing import Any

from ..exceptions import RedisLockError
from ..locks.pipeline import run_scripts
from ..queue.records import DEAD, DELAYED, IN_FLIGHT, READY
from ..queue.worker import counters_key
from ..wire import to_text
from .families import Family
from .histograms import timings

#: Outcomes in the counters hash that end a run, as ``redislock_queue_tasks_processed_total``.
OUTCOMES = ("succeeded", "retried", "dead", "dropped", "lost")


class Families:
    """The families of one scrape, created in a fixed order."""

    def __init__(self) -> None:
        def family(name: str, kind: str, text: str) -> Family:
            return Family(f"redislock_{name}", kind, text)

        self.up = family("backend_up", "gauge", "1 when the alias's Redis answered this scrape.")
        self.tasks = family("queue_tasks", "gauge", "Tasks in a queue by state.")
        self.oldest = family(
            "queue_oldest_ready_age_seconds",
            "gauge",
            "How long the oldest ready task has been due (0 when none is ready).",
        )
        self.lease = family(
            "queue_next_lease_deadline_seconds",
            "gauge",
            "Seconds until the earliest lease of an in-flight task ends (negative: it ended "
            "and waits for recovery by the next claim); absent when nothing is in flight.",
        )
        self.expired = family(
            "queue_expired_leases", "gauge", "In-flight tasks whose lease has ended."
        )
        self.processed = family(
            "queue_tasks_processed",
            "counter",
            "Task runs finished by drain_queue workers, by outcome.",
        )
        self.failed = family(
            "queue_tasks_failed", "counter", "Task runs that raised (retried, dead or dropped)."
        )
        self.held = family("locks_held", "gauge", "Locks held on an alias.")
        self.wait = family(
            "lock_wait_seconds",
            "histogram",
            "Time spent in acquire() until a lock was granted (this process).",
        )
        self.hold = family(
            "lock_hold_seconds",
            "histogram",
            "Time from grant to release of a lock (this process).",
        )
        self.duration = family(
            "scrape_duration_seconds", "gauge", "How long this scrape took to read Redis."
        )

    def all(self) -> list[Family]:
        return [
            self.up,
            self.tasks,
            self.oldest,
            self.lease,
            self.expired,
            self.processed,
            self.failed,
            self.held,
            self.wait,
            self.hold,
            self.duration,
        ]


def queue_rows(backend: Any) -> list[tuple[str, list[Any]]]:
    """``(queue name, metrics_queue reply)`` for every queue of a queue backend."""
    names = backend.queue_names()
    queues = [backend.queue(name) for name in names]
    calls: list[tuple[str, list[str], list[Any]]] = [
        ("metrics_queue", [*q.keys, counters_key(q)], []) for q in queues
    ]
    replies = run_scripts(backend, calls)
    for reply in replies:
        if isinstance(reply, Exception):
            raise reply
    return list(zip(names, replies, strict=True))


def add_queue(out: Families, alias: str, name: str, reply: list[Any]) -> None:
    """Turn one ``metrics_queue`` reply into samples."""
    now, due, pending, flying, dead, oldest, lease, expired = (int(float(v)) for v in reply[:8])
    labels = {"alias": alias, "queue": name}
    for state, count in ((READY, due), (DELAYED, pending - due), (IN_FLIGHT, flying), (DEAD, dead)):
        out.tasks.add(count, {**labels, "state": state})
    out.oldest.add((now - oldest) / 1e6 if 0 <= oldest <= now else 0.0, labels)
    if lease >= 0:
        out.lease.add((lease - now) / 1e6, labels)
    out.expired.add(expired, labels)
    flat = reply[8:]
    counters = {to_text(flat[i]): int(flat[i + 1]) for i in range(0, len(flat), 2)}
    for outcome in OUTCOMES:
        out.processed.add(counters.get(outcome, 0), {**labels, "outcome": outcome}, "_total")
    out.failed.add(counters.get("failed", 0), labels, "_total")


def collect() -> list[Family]:
    """Every family of one scrape (reads Redis; see the module docs for the cost)."""
    from ..handlers import locks, queues

    started = time.monotonic()
    out = Families()
    for alias in queues:
        labels = {"kind": "queues", "alias": alias}
        try:
            backend = queues[alias]
            rows = queue_rows(backend) if hasattr(backend, "queue_names") else []
        except (RedisLockError, NotImplementedError):
            out.up.add(0, labels)
            continue
        out.up.add(1, labels)
        for name, reply in rows:
            add_queue(out, alias, name, reply)
    for alias in locks:
        labels = {"kind": "locks", "alias": alias}
        try:
            held = locks[alias].held_lock_count()
        except AttributeError:
            continue  # a backend that cannot count (Redlock): no gauge rather than a wrong one
        except RedisLockError:
            out.up.add(0, labels)
            continue
        out.up.add(1, labels)
        out.held.add(held, {"alias": alias})
    for table, family in ((timings.wait, out.wait), (timings.hold, out.hold)):
        for alias, histogram in sorted(table.items()):
            buckets, total, count = histogram.snapshot()
            family.add_histogram(buckets, total, count, {"alias": alias})
    out.duration.add(time.monotonic() - started)
    return out.all()
