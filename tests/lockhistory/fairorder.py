"""The fair lock's order in a history: grant order = arrival order among live waiters.

Part of :mod:`tests.lockhistory.checker` (which reads the ``{"ev": "fair"}`` records and calls
:func:`fair_order`); pure Python, times are ``time.monotonic()`` seconds of every process.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from .records import Violation

#: Seconds taken off a fair-lock waiter's certain lease: the lease runs on the server's clock.
FAIR_MARGIN = 0.05


@dataclass(frozen=True)
class FairWait:
    """One acquire of a fair lock, as its caller saw it: each try's send and reply.

    ``tries`` are ``(start, end, code, place, resent)``: ``start`` when the ``fair_acquire``
    call was first sent, ``end`` when its reply came (after resends of a lost reply: the call
    took effect somewhere in between, at the first send that reached Redis), ``code`` 1
    granted, 0 refused, -1 no reply at all (Redis unreachable: the call was taken back);
    ``place`` the 1-based place in the queue a refused waiting try reported (0: not queued);
    ``resent`` 1 when a reply was lost and the call resent (older records have no fifth
    field: not resent). ``leave`` is
    when the call to leave the queue was sent (a timeout, a take-back), ``lease`` the
    wait-lease in seconds, ``granted`` whether the acquire returned the lock.
    """

    worker: str
    op: str
    name: str
    lease: float
    tries: list[tuple[float, float, int, int, int]]
    leave: float | None
    granted: bool

    @classmethod
    def of(cls, rec: dict[str, Any]) -> FairWait:
        tries = [
            (float(t[0]), float(t[1]), int(t[2]), int(t[3]), int(t[4]) if len(t) > 4 else 0)
            for t in rec["tries"]
        ]
        return cls(
            str(rec["worker"]),
            str(rec["op"]),
            rec["name"],
            float(rec["lease"]),
            tries,
            rec.get("leave"),
            bool(rec.get("granted")),
        )

    @property
    def first_send(self) -> float:
        """No arrival of this call can be earlier: its first try's send."""
        return self.tries[0][0]

    def grant(self) -> tuple[float, float] | None:
        """The interval the grant happened in (its try's send and reply), if granted."""
        if not self.granted:
            return None
        return next(((t[0], t[1]) for t in self.tries if t[2] == 1), None)

    def queued(self) -> int | None:
        """Index of the first try whose reply said this call was queued (its arrival)."""
        return next((i for i, t in enumerate(self.tries) if t[2] == 0 and t[3]), None)

    def tally(self) -> list[str]:
        """What this acquire adds to the report's counts."""
        if self.queued() is None:
            return ["acquires"]
        if self.granted:
            return ["acquires", "queued (arrival acknowledged)", "granted after queueing"]
        return ["acquires", "queued (arrival acknowledged)"]

    def live_until(self) -> float:
        """Until when this waiter was certainly queued and live (its arrival acknowledged).

        Each waiting try renews the lease at a moment inside its call, so after a try sent at
        ``start`` the place is kept until ``start + lease`` at least. The chain of renewals
        holds while each next try's reply came before the current certain deadline; after a
        gap the lease may have lapsed (the waiter would queue again at the back), so nothing
        later is certain. The waiter stops waiting when its granting try or its leave is sent,
        and may have stopped when a try whose reply was lost was sent: that try's first send
        may have been granted, and the grant may have ended by its TTL before the resend came
        (a process stopped past the TTL), which then queues the waiter again at the back.
        """
        first = self.queued()
        if first is None:
            return float("-inf")
        until = self.tries[first][0] + self.lease - FAIR_MARGIN
        for start, end, code, place, resent in self.tries[first + 1 :]:
            if code != 0 or not place or resent or end >= until:
                break
            until = max(until, start + self.lease - FAIR_MARGIN)
        ends = [until]
        grant = self.grant()
        if grant is not None:
            ends.append(grant[0])
        if self.leave is not None:
            ends.append(float(self.leave))
        ends += [t[0] for t in self.tries[first + 1 :] if t[2] != 0 or not t[3] or t[4]]
        return min(ends)


def fair_order(waits: list[FairWait]) -> list[Violation]:
    """A fair lock grants in arrival order among live waiters.

    ``B``'s grant is a violation when another call ``A`` certainly arrived first (its queued
    reply came before ``B``'s first try was sent) and was certainly still queued and live for
    the whole of ``B``'s granting try (see :meth:`FairWait.live_until`). Arrival and grant
    times are the intervals of the calls that made them, so a call whose reply was lost
    (resent, its effect somewhere between its first send and its reply) is flagged only when
    the order is broken for every moment it may have taken effect.
    """
    found: list[Violation] = []
    by_name: dict[str, list[FairWait]] = defaultdict(list)
    for wait in waits:
        if wait.tries:
            by_name[wait.name].append(wait)
    for name, items in by_name.items():
        ahead = []
        for wait in items:
            first = wait.queued()
            if first is not None:
                ahead.append((wait.tries[first][1], wait.live_until(), wait))
        ahead.sort(key=lambda row: row[0])
        for b in items:
            grant = b.grant()
            if grant is None:
                continue
            for arrived, live_until, a in ahead:
                if arrived >= b.first_send:
                    break  # sorted by arrival: none of the rest certainly came first
                if a is b or live_until <= grant[1]:
                    continue
                found.append(
                    Violation(
                        "fair grant out of arrival order",
                        name,
                        f"{b.op} ({b.worker}) was granted while {a.op} ({a.worker}), queued "
                        f"{(b.first_send - arrived) * 1000:.1f} ms before {b.op} first asked, "
                        "was still waiting with a live lease",
                        [a, b],
                    )
                )
                break
    return found
