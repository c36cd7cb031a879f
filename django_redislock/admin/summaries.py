"""The overview's and the sales panel's view of every queue of an alias: one pipeline.

Each queue's numbers come from its summary script (:mod:`~django_redislock.queue.stats`);
a queue whose keys cannot be read gets a row with its error instead of blanking the alias.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..backends.redis import RedisQueueBackend
from ..exceptions import ConfigurationError, RedisLockError
from ..locking.pipeline import run_scripts
from ..queue.stats import QueueStats, stats_or_error, summary_call
from .keytypes import explain
from .trends import trend_call, trend_or_none


@dataclass(frozen=True)
class QueueSummary:
    """One queue's row on the overview: its :class:`QueueStats`, or why it could not be read.

    The counts read as 0 and the times as None for a queue that could not be read.
    """

    name: str
    stats: QueueStats | None = None
    #: Why this queue could not be read (a key of the wrong type, a script error); "" when read.
    error: str = ""
    #: Its rates (:mod:`.trends`), when the page reads them.
    trend: Any = None

    @property
    def ready(self) -> int:
        return self.stats.ready if self.stats else 0

    @property
    def delayed(self) -> int:
        return self.stats.delayed if self.stats else 0

    @property
    def in_flight(self) -> int:
        return self.stats.in_flight if self.stats else 0

    @property
    def dead(self) -> int:
        return self.stats.dead if self.stats else 0

    @property
    def expired_leases(self) -> int:
        return self.stats.expired_leases if self.stats else 0

    @property
    def oldest_due_age(self) -> float | None:
        return self.stats.oldest_due_age if self.stats else None

    @property
    def next_lease_in(self) -> float | None:
        return self.stats.next_lease_in if self.stats else None

    @property
    def paused(self) -> bool:
        """Paused (see :mod:`django_redislock.queue.flow`)."""
        return bool(self.stats and self.stats.paused)

    @property
    def rate_limit(self) -> str:
        """Its rate limit as written, or ""."""
        return (self.stats.rate_limit if self.stats else None) or ""

    @property
    def total(self) -> int:
        return self.stats.total if self.stats else 0

    @property
    def held(self) -> int:
        """Tasks its concurrency groups hold (see :attr:`QueueStats.held`)."""
        return self.stats.held if self.stats else 0

    @property
    def trouble(self) -> tuple[int, float, int]:
        """Sort key of the overview, most troubled first: errors, expired leases and dead
        tasks, then the longest wait of a due task, then depth."""
        urgent = int(bool(self.error)) * 4 + int(self.expired_leases > 0) * 2 + int(self.dead > 0)
        return (-urgent, -(self.oldest_due_age or 0.0), -self.total)


def queue_summaries(
    backend: RedisQueueBackend, names: list[str] | None = None, trends: bool = False
) -> list[QueueSummary]:
    """A summary of every queue of the alias: two round trips (names, then one pipeline).

    With ``trends``, each summary also carries the queue's rates (read in the same pipeline).

    A queue that cannot be read (its keys hold the wrong type, its name is not
    a valid queue name) gets a summary with ``error`` set; the others are read
    as usual. Errors of the whole alias (unreachable, BUSY) are raised.
    """
    names = backend.queue_names() if names is None else names
    calls: list[tuple[str, list[str], list[Any]]] = []
    rows: list[QueueSummary] = []
    readable: list[str] = []
    for name in names:
        try:
            calls.append(summary_call(backend.queue(name)))
            readable.append(name)
        except (RedisLockError, ConfigurationError) as exc:
            rows.append(QueueSummary(name, error=str(exc)))
    if trends:
        calls += [trend_call(backend.queue(name)) for name in readable]
    replies = run_scripts(backend, calls)
    rates = dict(zip(readable, replies[len(readable) :], strict=False))
    for name, reply in zip(readable, replies, strict=False):
        stats = stats_or_error(name, reply)
        if isinstance(stats, Exception):
            rows.append(QueueSummary(name, error=explain(backend.queue(name), str(stats))))
            continue
        trend = trend_or_none(rates[name]) if name in rates else None
        rows.append(QueueSummary(name, stats, trend=trend))
    order = {name: i for i, name in enumerate(names)}
    return sorted(rows, key=lambda row: order[row.name])
