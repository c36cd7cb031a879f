"""The one exception tree of django-redislock.

Runtime errors derive from :class:`RedisLockError`; configuration errors derive
from Django's :class:`~django.core.exceptions.ImproperlyConfigured` and are kept
out of the runtime tree, so ``except RedisLockError`` never hides a broken
setting (the same split django-anymail makes).
"""

from __future__ import annotations

from django.core.exceptions import ImproperlyConfigured


class RedisLockError(Exception):
    """Base of every runtime error raised by this app."""


class InvalidArgument(RedisLockError, ValueError):
    """A call got a bad argument; the message names the argument and what is allowed.

    Raised before anything is sent to Redis, so nothing is half-written.
    """


class ConnectionFailed(RedisLockError):
    """Redis could not be reached; the message says which setting to check."""


class ServerOutOfMemory(RedisLockError):
    """Redis refused a write because it is at ``maxmemory`` (its ``OOM`` error).

    The call did not change Redis (a script is refused before it writes); free memory
    (drain or purge queues, raise ``maxmemory``) and call again. Raised in place of
    redis-py's ``OutOfMemoryError`` so that ``except RedisLockError`` covers it.
    """


class LockError(RedisLockError):
    """An error about one named lock."""

    def __init__(self, message: str, *, name: str = "") -> None:
        super().__init__(message)
        self.name = name


class LockNotAcquired(LockError):
    """The lock was held by someone else for the whole of the allowed wait."""


class LockNotOwned(LockError):
    """The caller tried to release or extend a lock it does not hold."""


class LockLost(LockError):
    """The hold ended without the holder releasing it (expired, stolen or force-released)."""


class ReplicaAckTimeout(LockError):
    """Fewer replicas than ``MIN_REPLICAS_ACK`` acknowledged a grant in time; it was undone."""


class LockUsageError(LockError, RuntimeError):
    """A lock object was used wrongly: shared between threads or tasks, or acquired twice."""


class RateLimited(LockError):
    """A rate limit did not admit a call within its wait (``@rate_limited(timeout=...)``)."""


class QueueError(RedisLockError):
    """An error about one named queue."""


class TaskNotRegistered(QueueError):
    """A queued task names a function that is not a registered ``@task`` (deleted or renamed)."""


class TaskImportError(QueueError):
    """A task's module raised while being imported: a broken deploy that a later one may fix.

    The worker retries the task with backoff until the module imports (it does not
    stop: the other tasks and queues go on).
    """


class UndecodablePayload(QueueError):
    """A stored payload cannot be decoded (corrupt, too deep, or written by another serializer).

    Raised when ``Task.payload`` is read; ``Task.raw_payload`` and
    ``Task.payload_text`` still show what is stored. The worker dead-letters such
    a task with this message.
    """


class TaskFailed(QueueError):
    """A ``@task(store_result=True)`` call was dead-lettered; ``error`` is its stored error."""

    def __init__(self, message: str, *, task_id: str = "", error: str = "") -> None:
        super().__init__(message)
        self.task_id = task_id
        self.error = error


class ResultTimeout(QueueError, TimeoutError):
    """``result(timeout)`` ran out of time before the call finished (it may still run)."""


class ResultUnknown(QueueError):
    """Nothing is known of a call's result: it expired, was removed, or was never stored."""


class ConfigurationError(ImproperlyConfigured):
    """A setting of this app is wrong; the message names the setting."""


class InvalidLockBackend(ConfigurationError):
    """``REDISLOCK_LOCKS`` names an unknown alias or a backend that cannot be loaded."""


class InvalidQueueBackend(ConfigurationError):
    """``REDISLOCK_QUEUES`` names an unknown alias or a backend that cannot be loaded."""


class MissingDependency(ConfigurationError):
    """An optional package is needed; the message names the pip extra that installs it."""


class InventoryError(RedisLockError):
    """An error about one stock (refusals on the hot path are results, not exceptions)."""


class StockNotFound(InventoryError):
    """The stock was never set (or was cleared): ``add``/``remaining`` need ``set()`` first."""


class SoftTimeLimitExceeded(QueueError):
    """Raised inside a task that ran past its ``soft_time_limit``: catch it to clean up.

    An ``Exception``, so a task may catch it (to save progress, say) and end
    before its hard ``time_limit``; uncaught, it fails the run like any error.
    Where each pool can raise it: see docs/workers.md, "Time limits".
    """


class TimeLimitExceeded(BaseException):
    """Raised inside a task that ran past its hard ``time_limit``; the run is a failed attempt.

    A ``BaseException`` like ``KeyboardInterrupt``, so a task's ``except Exception``
    does not swallow it. The worker records the run with the error
    ``TimeLimitExceeded: ran longer than N s`` and retries or dead-letters it.
    """


class Retry(QueueError):
    """Raise inside a task to run it again later, on the task's own terms.

    ``countdown``: seconds until the next run (default: the task's backoff);
    ``max_retries``: how many retries the task gets in all (its runs are
    ``max_retries + 1``; default: the task's ``max_attempts``). The run is recorded as
    a failed attempt with this exception's message; with no retries left the task is
    dead-lettered, as a failure would be. ``exc`` is the error that made the task retry,
    shown as the run's error.
    """

    def __init__(
        self,
        message: str = "",
        *,
        countdown: float | None = None,
        max_retries: int | None = None,
        exc: BaseException | None = None,
    ) -> None:
        # checked here, not with ..validation (which imports this module)
        if countdown is not None and (
            isinstance(countdown, bool)
            or not isinstance(countdown, (int, float))
            or not 0 <= countdown < float("inf")
        ):
            raise InvalidArgument(f"countdown must be seconds >= 0, got {countdown!r}")
        if max_retries is not None and (
            isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0
        ):
            raise InvalidArgument(f"max_retries must be an int >= 0, got {max_retries!r}")
        self.countdown = None if countdown is None else float(countdown)
        self.max_retries = max_retries
        self.exc = exc
        if not message:
            message = f"retry requested ({type(exc).__name__}: {exc})" if exc else "retry requested"
        super().__init__(message)


class TaskCancelled(BaseException):
    """Raised inside a task that was cancelled while it ran (``Enqueued.cancel()``).

    A ``BaseException`` like :class:`TimeLimitExceeded`, so ``except Exception`` does not
    swallow it. The run ends as "cancelled": the task is dead-lettered with the reason,
    its history shows ``cancelled`` and a stored result has the status ``CANCELLED``.
    """


class TaskExpired(QueueError):
    """The error of a task that was not started before its ``expires`` time: it never runs."""
