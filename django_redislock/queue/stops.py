"""What interrupts a worker: the errors it rides out as outages, and the stop of an idle wait.

A leaf module: the worker and its pools (:mod:`.pool_thread`, :mod:`.pool_limits`) both
read these, and none of the pools imports the worker at run time.
"""

from __future__ import annotations

import redis

from ..exceptions import ConnectionFailed

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
