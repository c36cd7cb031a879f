"""Read the numbers of every queue and lock alias, in a fixed number of round trips.

Per queue alias: one ``SMEMBERS`` of the queue list, then one ``queue_summary``
script per queue in one pipeline (one request per master on a Cluster), each
read as a :class:`~django_redislock.queue.stats.QueueStats`. Per lock alias:
one pipeline over the lock index buckets (``held_lock_count``), and the
semaphores and fair locks from the coordination index (:mod:`.coordination`).
Every script is counts and first members of sorted sets, never a scan, so a
scrape costs the same with a million queued tasks as with ten.

Every alias is read in its own thread under one deadline
(``REDISLOCK_METRICS_TIMEOUT``, 1 s by default), so a hung Redis costs the
scrape that deadline once, not a socket timeout per alias. An alias that
fails or does not answer in time is reported with ``redislock_backend_up 0``
and a ``redislock_scrape_error`` sample; a queue that fails (a key of the
wrong type, a script error) gets its own error sample and the alias's other
queues are exported as usual.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any, cast

from ..exceptions import ConfigurationError, ConnectionFailed, RedisLockError
from ..locking.pipeline import run_scripts
from ..queue.records import DEAD, DELAYED, IN_FLIGHT, READY
from ..queue.stats import QueueStats, stats_or_error, summary_call

if TYPE_CHECKING:
    from ..backends.redis import RedisQueueBackend
from .coordination import acquisitions, read_coordination
from .deadline import DeadlineExceeded, all_within, metrics_timeout
from .families import Family
from .histograms import timings
from .workers import per_queue, read_workers

logger = logging.getLogger("django_redislock.metrics")

#: Outcomes in the counters hash that end a run, as ``redislock_queue_tasks_processed_total``.
OUTCOMES = ("succeeded", "retried", "dead", "dropped", "lost", "cancelled", "expired")
#: The counters a scrape reads: the outcomes and the runs that raised.
COUNTERS = (*OUTCOMES, "failed")


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
        self.paused = family("queue_paused", "gauge", "1 while a queue is paused, else 0.")
        self.workers = family(
            "workers",
            "gauge",
            "Live drain_queue workers (heartbeat within WORKER_HEARTBEAT_TTL) draining a queue.",
        )
        self.wedged = family(
            "workers_wedged",
            "gauge",
            "Live workers draining a queue whose pool is wedged (they beat but run nothing).",
        )
        self.running = family(
            "worker_running_tasks",
            "gauge",
            "Tasks of a queue that live workers were running at their last heartbeat.",
        )
        self.held = family("locks_held", "gauge", "Locks held on an alias.")
        self.acquisitions = family(
            "lock_acquisitions",
            "counter",
            "acquire() calls of locks, permits and fair locks that returned, by kind and "
            "outcome (this process).",
        )
        self.coord_used = family(
            "coordination_in_use",
            "gauge",
            "Semaphores or fair locks with a holder or a live waiter, by kind.",
        )
        self.coord_held = family(
            "coordination_held",
            "gauge",
            "Permits held (semaphores) or holds (fair locks), by kind.",
        )
        self.coord_waiters = family(
            "coordination_waiters",
            "gauge",
            "Callers queued for a semaphore or a fair lock whose wait-lease is live, by kind.",
        )
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
        self.errors = family(
            "scrape_error",
            "gauge",
            '1 for each alias (queue="") or queue that could not be read this scrape, by reason.',
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
            self.paused,
            self.processed,
            self.failed,
            self.workers,
            self.wedged,
            self.running,
            self.held,
            self.coord_used,
            self.coord_held,
            self.coord_waiters,
            self.acquisitions,
            self.errors,
            self.wait,
            self.hold,
            self.duration,
        ]


def reason(exc: BaseException) -> str:
    """A short, bounded label for why a read failed (``reason`` of the error series)."""
    if isinstance(exc, DeadlineExceeded):
        return "timeout"
    if isinstance(exc, ConnectionFailed):
        # a BUSY server is an outage to the calls (the command did not run), told apart here
        cause = exc.__cause__
        return "busy" if cause is not None and str(cause).startswith("BUSY") else "unreachable"
    text = str(exc)
    for prefix, label in (("WRONGTYPE", "wrongtype"), ("BUSY", "busy"), ("LOADING", "loading")):
        if text.startswith(prefix):
            return label
    if text.startswith(("OOM", "READONLY", "CLUSTERDOWN", "MASTERDOWN")):
        return text.split(" ", 1)[0].lower()
    return "error"


def queue_rows(backend: RedisQueueBackend) -> list[tuple[str, QueueStats | Exception]]:
    """``(queue name, its stats or the error of that queue)`` for every queue of the alias.

    A queue whose keys hold the wrong type (or whose script fails) gets its
    exception instead of stats; the other queues of the alias are unaffected.
    Errors of the whole alias (unreachable, BUSY on the queue list) are raised.
    """
    names = backend.queue_names()
    calls: list[tuple[str, list[str], list[Any]]] = []
    rows: list[tuple[str, Exception | None]] = []
    for name in names:
        try:
            calls.append(summary_call(backend.queue(name), COUNTERS))
            rows.append((name, None))
        except (RedisLockError, ConfigurationError) as exc:
            rows.append((name, exc))
    replies = iter(run_scripts(backend, calls))
    return [
        (name, stats_or_error(name, next(replies), COUNTERS) if got is None else got)
        for name, got in rows
    ]


def add_queue(out: Families, alias: str, stats: QueueStats) -> None:
    """Turn one queue's stats into samples."""
    labels = {"alias": alias, "queue": stats.queue}
    for state, count in (
        (READY, stats.ready),
        (DELAYED, stats.delayed),
        (IN_FLIGHT, stats.in_flight),
        (DEAD, stats.dead),
    ):
        out.tasks.add(count, {**labels, "state": state})
    out.oldest.add(stats.oldest_due_age or 0.0, labels)
    if stats.next_lease_in is not None:
        out.lease.add(stats.next_lease_in, labels)
    out.expired.add(stats.expired_leases, labels)
    out.paused.add(int(stats.paused), labels)
    for outcome in OUTCOMES:
        out.processed.add(stats.counters.get(outcome, 0), {**labels, "outcome": outcome}, "_total")
    out.failed.add(stats.counters.get("failed", 0), labels, "_total")


def add_registries(out: Families, results: dict[str, Any]) -> None:
    """Take the workers registry reads out of ``results`` and add their samples."""
    for key in [key for key in results if key.startswith("workers:")]:
        alias = key.partition(":")[2]
        add_workers(out, alias, results.pop(key), results.get(f"queues:{alias}"))


def add_workers(out: Families, alias: str, result: Any, queue_rows: Any) -> None:
    """Live workers and running tasks per queue; a registry that fails is an error sample."""
    if isinstance(result, Exception):
        failed(out, "workers", alias, "", result)
        return
    if result is None:
        return
    known = [name for name, _ in queue_rows] if isinstance(queue_rows, list) else []
    for name, workers, running, wedged in per_queue(result, known):
        out.workers.add(workers, {"alias": alias, "queue": name})
        out.wedged.add(wedged, {"alias": alias, "queue": name})
        out.running.add(running, {"alias": alias, "queue": name})


def read_queues(alias: str) -> list[tuple[str, QueueStats | Exception]] | None:
    from ..handlers import queues

    backend = queues[alias]
    try:
        return queue_rows(cast("RedisQueueBackend", backend))  # others: AttributeError
    except (AttributeError, NotImplementedError):
        return None


def read_locks(alias: str) -> int | None:
    from ..handlers import locks

    try:
        count: int = locks[alias].held_lock_count()
    except (AttributeError, NotImplementedError):
        return None  # a backend that cannot count: no gauge rather than a wrong one
    return count


def add_coordination(out: Families, results: dict[str, Any]) -> None:
    """Take the semaphores and fair locks reads out of ``results`` and add their samples."""
    for key in [key for key in results if key.startswith("coordination:")]:
        alias = key.partition(":")[2]
        result = results.pop(key)
        labels = {"kind": "coordination", "alias": alias}
        if isinstance(result, Exception):
            out.up.add(0, labels)
            failed(out, "coordination", alias, "", result)
            continue
        if result is None:
            continue  # a backend without semaphores and fair locks (Redlock)
        out.up.add(1, labels)
        for kind, (used, held, waiting) in sorted(result.items()):
            labels = {"alias": alias, "kind": kind}
            out.coord_used.add(used, labels)
            out.coord_held.add(held, labels)
            out.coord_waiters.add(waiting, labels)


def add_acquisitions(out: Families) -> None:
    """The acquire outcomes counted in this process (see :mod:`.coordination`)."""
    for (alias, kind, outcome), n in acquisitions.snapshot():
        out.acquisitions.add(n, {"alias": alias, "kind": kind, "outcome": outcome}, "_total")


def failed(out: Families, kind: str, alias: str, queue: str, exc: BaseException) -> None:
    why = reason(exc)
    out.errors.add(1, {"kind": kind, "alias": alias, "queue": queue, "reason": why})
    logger.warning(
        "metrics: %s alias %r%s unreadable (%s): %s",
        kind,
        alias,
        f" queue {queue!r}" if queue else "",
        why,
        exc,
    )


def collect() -> list[Family]:
    """Every family of one scrape; returns within about ``REDISLOCK_METRICS_TIMEOUT``.

    Every alias is read in its own thread, all at once, each under the same
    deadline. An alias that fails or does not answer in time is exported as
    ``backend_up 0`` with an error sample; a queue that fails is left out with
    an error sample of its own; everything else is exported as usual.
    """
    from ..handlers import locks, queues

    started = time.monotonic()
    out = Families()
    jobs: dict[str, Callable[[], Any]] = {}
    for alias in queues:
        jobs[f"queues:{alias}"] = partial(read_queues, alias)
        jobs[f"workers:{alias}"] = partial(read_workers, alias)
    for alias in locks:
        jobs[f"locks:{alias}"] = partial(read_locks, alias)
        jobs[f"coordination:{alias}"] = partial(read_coordination, alias)
    results = all_within(metrics_timeout(), jobs)
    add_registries(out, results)  # takes the "workers:<alias>" results out
    add_coordination(out, results)  # takes the "coordination:<alias>" results out
    for key, result in results.items():
        kind, _, alias = key.partition(":")
        labels = {"kind": kind, "alias": alias}
        if isinstance(result, Exception):
            out.up.add(0, labels)
            failed(out, kind, alias, "", result)
            continue
        if kind == "locks":
            if result is not None:
                out.up.add(1, labels)
                out.held.add(result, {"alias": alias})
            continue
        if result is None:
            continue  # a queue backend that cannot list its queues
        out.up.add(1, labels)
        for name, stats in result:
            if isinstance(stats, Exception):
                failed(out, kind, alias, name, stats)
            else:
                add_queue(out, alias, stats)
    add_acquisitions(out)
    for table, family in ((timings.wait, out.wait), (timings.hold, out.hold)):
        for alias, histogram in sorted(table.items()):
            buckets, total, count = histogram.snapshot()
            family.add_histogram(buckets, total, count, {"alias": alias})
    out.duration.add(time.monotonic() - started)
    return out.all()
