"""How a worker rides out a Redis outage: when to try again, and when to give up.

A connection error does not end a worker. The first one of an outage is logged
once; each try after it waits a capped exponential backoff with jitter (so that a
fleet of workers does not reconnect in step after a restart); once Redis answers
again the outage's length is logged. Only an outage longer than the give-up time
(``OPTIONS['WORKER_GIVE_UP']`` or ``drain_queue --give-up``) raises
:class:`~.stops.WorkerGaveUp`.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from typing import TypeVar

from .stops import OUTAGES, WorkerGaveUp

T = TypeVar("T")

logger = logging.getLogger("django_redislock.worker")

#: Reconnect delays: the first, and the cap of the doubling (each with jitter).
RECONNECT_FIRST = 0.1
RECONNECT_MAX = 5.0
#: Doublings counted at most (the cap is reached long before).
MAX_DOUBLINGS = 30


class Outage:
    """One worker's view of Redis being unreachable: since when, and how many tries."""

    def __init__(self, give_up: float) -> None:
        self.give_up = give_up
        #: when the current outage began (monotonic clock), or None while Redis answers
        self.since: float | None = None
        self.retries = 0

    def next_delay(self, exc: BaseException) -> float:
        """Seconds to wait before the next try after ``exc``; raises past the give-up time."""
        now = time.monotonic()
        if self.since is None:
            self.since, self.retries = now, 0
            logger.warning(
                "Redis is unreachable (%s); the worker keeps retrying for up to %gs",
                exc,
                self.give_up,
            )
        elif now - self.since >= self.give_up:
            raise WorkerGaveUp(
                f"Redis was unreachable for {now - self.since:.1f}s, longer than the "
                f"worker's give-up time of {self.give_up:g}s (OPTIONS['WORKER_GIVE_UP'] or "
                f"drain_queue --give-up): {exc}"
            ) from exc
        ceiling = min(RECONNECT_MAX, RECONNECT_FIRST * 2.0**self.retries)
        self.retries = min(self.retries + 1, MAX_DOUBLINGS)
        delay = min(ceiling * random.uniform(0.5, 1.0), self.since + self.give_up - now)
        return max(delay, 0.0)

    def ended(self) -> None:
        """Redis answered: log how long the outage lasted, if there was one."""
        if self.since is not None:
            logger.warning("Redis answers again after %.1fs", time.monotonic() - self.since)
            self.since = None


def until_reachable(
    call: Callable[[], T], give_up: float, sleep: Callable[[float], object] = time.sleep
) -> T:
    """Return ``call()``, trying again through an outage as a running worker does.

    A worker started while Redis is still down (a container that comes up before its
    server, a restart of both) waits for it instead of exiting at once: under a process
    supervisor, exiting would only restart it in a loop. Past ``give_up`` seconds it
    raises :class:`~.stops.WorkerGaveUp`, as the worker's own loop does.
    """
    outage = Outage(give_up)
    while True:
        try:
            result = call()
        except OUTAGES as exc:
            sleep(outage.next_delay(exc))
            continue
        outage.ended()
        return result
