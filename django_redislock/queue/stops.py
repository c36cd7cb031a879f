"""What interrupts a worker: the outages it rides out, and what stops a wait, a run or itself.

A leaf module: the worker and its pools (:mod:`.pool_thread`, :mod:`.pool_limits`) both
read these, and none of the pools imports the worker at run time.
"""

from __future__ import annotations

import redis

from ..exceptions import ConnectionFailed, QueueError

#: Errors that mean "Redis is unreachable for now" (a restart, a failover, a partition).
OUTAGES: tuple[type[BaseException], ...] = (
    ConnectionFailed,
    redis.ConnectionError,
    redis.TimeoutError,
    redis.exceptions.ClusterError,
    redis.exceptions.TryAgainError,
    redis.exceptions.ReadOnlyError,
)


class Interrupted(Exception):
    """Raised out of an idle wait by the stop signal handler."""


class ForcedStop(BaseException):
    """A second SIGTERM/SIGINT: raised out of whatever runs, the running task included.

    A BaseException, like KeyboardInterrupt, so a task's ``except Exception`` does
    not swallow it. The interrupted task's claim stays in flight until its lease ends;
    the unstarted tasks of the batch are given back at once. The worker keeps the
    instance it raised (``Worker._stop_raised``): a run lets only that very instance
    through, so a ForcedStop a task raises itself is the task's failure like any other.
    """


class PoolBroken(QueueError):
    """A pool thread or the async pool's event loop ended although no task may end it.

    The worker stops (exit status 1, a log line naming the running tasks) rather than
    heart-beat on with a pool that runs nothing.
    """


class WorkerGaveUp(ConnectionFailed):
    """Redis stayed unreachable for longer than the worker's give-up time."""


class HungTask(QueueError):
    """A run outlived its hard time limit and could not be ended: the worker exits.

    Its lease was renewed until the process ended, so no other worker ran it
    meanwhile; it comes back after its lease as a suspect, charged one attempt.
    """
