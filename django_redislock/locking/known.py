"""What one process knows of its rate limits' state, to refuse locally what Redis would refuse.

A GCRA limit's whole state is its theoretical arrival time (tat), and nothing but a reset
(``DEL``, a flush, a failover that lost writes) ever moves it earlier: every admission, by
any process, moves it later. Every answer of ``rate_take.lua`` therefore tells a lower
bound of the tat, and a lower bound stays one until the limit is reset:

* refused ``cost`` with a wait ``w``: ``tat = now + w + (burst - cost) * interval``;
* admitted now: ``tat >= now + cost * interval``;
* admitted at a slot ``w`` away (a reservation): ``tat = now + w + burst * interval``.

``now`` is the server's time when the script ran. The bound is kept on this process's
monotonic clock, counted from the moment *before* the call was sent (not from its reply),
which is at or before the server's ``now``: the bound is at or below the true tat, so a
take of ``cost`` units that the bound says must wait is one the server would refuse too.
A local refusal is therefore exact (never a refusal the server would not give), and
admissions always ask the server, so no process ever admits more than the limit. The
bound uses only durations the server measured, never its clock against ours.

A bound is trusted for :data:`HORIZON` seconds after it was learned: a reset made by
another process (which this one cannot see) is seen within that time at the latest, and a
limit refused for minutes costs one call a second per process, not one per decision. A
bound depends on the limit's key alone, not its rate or burst: a take with another rate
or burst (a limit changed at run time) is judged by its own interval and burst, as the
server judges it. The table is bounded (:data:`CAPACITY` limits): past it, the bounds
learned longest ago are dropped, which only sends their next decision to the server.
Reads and writes are single dict operations (atomic under the GIL); only trimming takes a
lock.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable
from typing import Any

#: How long a learned bound is trusted (seconds): a reset made elsewhere is seen by then.
HORIZON = 1.0

#: Most limits (name and key) a process keeps a bound for; past it, the table is trimmed to
#: half of it (the stale bounds, then those learned longest ago).
CAPACITY = 10_000


class KnownLimits:
    """Per limit key: (a lower bound of its tat, when it was learned), on ``time.monotonic``."""

    def __init__(self, capacity: int = CAPACITY, horizon: float = HORIZON) -> None:
        self.capacity = capacity
        self.horizon = horizon
        self._bounds: dict[Hashable, tuple[float, float]] = {}
        self._trimming = threading.Lock()

    def __len__(self) -> int:
        return len(self._bounds)

    def wait(self, which: Hashable, now: float, interval: float, burst: int, cost: int) -> float:
        """Seconds until ``cost`` units of limit ``which`` could be admitted, as far as this
        process knows (``interval`` in seconds); 0.0: nothing known, ask the server."""
        known = self._bounds.get(which)
        if known is None or now - known[1] >= self.horizon:
            return 0.0
        return max(0.0, known[0] + (cost - burst) * interval - now)

    def learn(self, which: Hashable, tat: float, learned: float) -> None:
        """Keep ``tat`` (a lower bound learned at ``learned``) unless a higher, still trusted
        bound is known."""
        known = self._bounds.get(which)
        if known is not None and tat < known[0] and learned - known[1] < self.horizon:
            return
        self._bounds.pop(which, None)  # re-inserted last: the oldest are trimmed first
        self._bounds[which] = (tat, learned)
        if len(self._bounds) > self.capacity:
            self._trim(learned)

    def forget(self, which: Hashable) -> None:
        """Drop what is known of ``which`` (after this process reset the limit)."""
        self._bounds.pop(which, None)

    def _trim(self, now: float) -> None:
        with self._trimming:
            if len(self._bounds) <= self.capacity:  # another thread trimmed it meanwhile
                return
            for which, (_, learned) in list(self._bounds.items()):
                if now - learned >= self.horizon:  # no longer trusted: worth nothing
                    self._bounds.pop(which, None)
            # down to half the capacity, so that trimming stays rare however many limits
            # are in use (the bounds learned longest ago go first)
            for which in list(self._bounds)[: len(self._bounds) - self.capacity // 2]:
                self._bounds.pop(which, None)


def known_limits(backend: Any) -> KnownLimits:
    """The table of ``backend`` (one per backend object, so per Redis deployment)."""
    table = backend.__dict__.get("_known_limits")
    if table is None:
        table = backend.__dict__.setdefault("_known_limits", KnownLimits())
    return table  # type: ignore[no-any-return]
