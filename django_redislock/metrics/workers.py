"""The workers registry in the metrics scrape: live workers and running tasks per queue.

One read-only ``workers_list`` script per queue alias, read in parallel with the
alias's queues under the same deadline (``REDISLOCK_METRICS_TIMEOUT``). Series are
per queue, never per worker: worker ids change with every restart, and a label
per worker would grow Prometheus's series without bound. The per-queue outcome
counters (``redislock_queue_tasks_processed_total``) already sum every worker.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import cast

from ..calls.node import Node
from ..queue.workers import WorkerList, count_by_queue, list_workers


def read_workers(alias: str) -> WorkerList | None:
    """The registry of a queue alias (counts only), or None for a backend without one."""
    from ..handlers import queues

    backend = queues[alias]
    if not hasattr(backend, "key"):
        return None
    return list_workers(cast(Node, backend))  # a Redis queue backend: it builds keys


def per_queue(listing: WorkerList, known: Iterable[str]) -> list[tuple[str, int, int, int]]:
    """``(queue, live workers, running tasks, wedged workers)`` for every known queue and every
    queue drained.

    A known queue that no worker drains gets ``0``, so "fewer workers than expected"
    alerts see the zero instead of a missing series. A wedged worker (its pool runs
    nothing, see :mod:`~django_redislock.queue.heartbeat`) is counted live and wedged.
    """
    counts = count_by_queue(listing)
    wedged: dict[str, int] = {}
    for worker in listing.workers:
        if not worker.healthy:
            for name in worker.queues:
                wedged[name] = wedged.get(name, 0) + 1
    names = sorted(set(known) | set(counts))
    return [(name, *counts.get(name, (0, 0)), wedged.get(name, 0)) for name in names]
