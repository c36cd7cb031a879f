"""The hard time-limit backstop of the process pool: what a killed run becomes.

A child reports each run that has a hard time limit (:class:`Run`); the supervisor
SIGKILLs a child whose run is still going :data:`KILL_GRACE` seconds past its limit
and, once the child is reaped, records the run here as a failed attempt.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from ..exceptions import RedisLockError
from .queue import Queue
from .records import Task
from .stops import OUTAGES

logger = logging.getLogger("django_redislock.worker.pool")

#: Seconds past its hard time limit before a run's child is killed (an in-process
#: limit, where the pool has one, gets this long to end the run itself).
KILL_GRACE = 1.0
#: What a failed call to Redis raises (the supervisor logs it and goes on).
FAILED_CALLS: tuple[type[BaseException], ...] = (RedisLockError, *OUTAGES)


@dataclass
class Run:
    """A run with a hard time limit that a child reported (see ``Reporter.started``)."""

    queue: str
    id: str
    claim: str
    attempts: int
    limit: float
    since: float
    max_attempts: int | None = None
    backoff: float | None = None
    backoff_max: float | None = None

    @property
    def kill_at(self) -> float:
        return self.since + self.limit + KILL_GRACE


def charge_killed_run(queue: Queue, run: Run) -> str | None:
    """Record a killed run as a failed attempt; the retry outcome, or None if Redis failed.

    Goes through ``Queue.retry`` with the run's claim token: a claim that is no longer
    current (the run finished and was acked just before the kill, or its lease had
    ended and another worker took it) answers ``lost`` and changes nothing, and so
    does a resend of this call. If Redis cannot be reached, the run's lease ends and
    the task comes back as a suspect, as for any worker that died.
    """
    task = Task(run.queue, run.id, None, 0, attempts=run.attempts, claim=run.claim)
    error = f"TimeLimitExceeded: killed after {run.limit:g} s"
    delay = queue.backoff(run.attempts, run.backoff, run.backoff_max)
    try:
        outcome = queue.retry(task, delay, error, run.max_attempts)
    except FAILED_CALLS as exc:
        logger.error(
            "could not record the killed run of task %s (%s); it comes back when its lease ends",
            run.id,
            exc,
        )
        return None
    logger.error("task %s of %r: %s (%s)", run.id, run.queue, error, outcome)
    return outcome
