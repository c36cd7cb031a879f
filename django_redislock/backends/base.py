"""The contract every lock and queue backend implements.

A backend is built once per alias per process by the handlers in
:mod:`django_redislock.handlers` from one entry of ``REDISLOCK_LOCKS`` or
``REDISLOCK_QUEUES``::

    {"BACKEND": "dotted.path", "LOCATION": ..., "KEY_PREFIX": "redislock", "OPTIONS": {...}}

A lock backend declares the optional features its callers branch on as
class-level flags (``supports_reentrant``, ``supports_read_write``,
``supports_listing``), so the admin and the commands can ask instead of catching
``NotImplementedError``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from django.core import checks

from ..conf import DEFAULT_KEY_PREFIX, DEFAULT_LOCATION, Option, option_errors, with_defaults
from ..exceptions import ConfigurationError

if TYPE_CHECKING:
    from ..locking import HeldLock, Lock, LockPage, ReadWriteLock
    from ..locking.fair import FairLock
    from ..locking.latch import CountDownLatch
    from ..locking.limiter import RateLimiter
    from ..locking.semaphore import Semaphore
    from ..queue.queue import Queue

#: The keys an alias's dict may have.
ALIAS_KEYS = ("BACKEND", "LOCATION", "KEY_PREFIX", "OPTIONS")


def alias_key_errors(params: Mapping[str, Any]) -> list[str]:
    """Return problems with the keys of one alias dict and its ``KEY_PREFIX``."""
    errors = []
    unknown = sorted(set(params) - set(ALIAS_KEYS), key=str)
    if unknown:
        errors.append(
            f"unknown key(s) {', '.join(map(repr, unknown))}; "
            f"valid keys are {', '.join(ALIAS_KEYS)}"
        )
    prefix = params.get("KEY_PREFIX", DEFAULT_KEY_PREFIX)
    if not isinstance(prefix, str) or not prefix or "{" in prefix or "}" in prefix:
        errors.append(f"KEY_PREFIX must be a non-empty string without braces, got {prefix!r}")
    return errors


class BaseBackend:
    """What lock and queue backends share: alias, location, key prefix and options."""

    #: The setting this backend is configured from, for error messages.
    settings_name: ClassVar[str] = ""
    #: The ``OPTIONS`` keys this backend accepts, with their defaults.
    option_schema: ClassVar[Mapping[str, Option]] = {}

    def __init__(self, alias: str, params: Mapping[str, Any]) -> None:
        errors = self.config_errors(params)
        if errors:
            raise ConfigurationError(f"{self.settings_name}[{alias!r}]: {errors[0]}")
        self.alias = alias
        self.location: Any = params.get("LOCATION", DEFAULT_LOCATION)
        self.key_prefix: str = params.get("KEY_PREFIX", DEFAULT_KEY_PREFIX)
        self.options: dict[str, Any] = with_defaults(params.get("OPTIONS", {}), self.option_schema)

    @classmethod
    def config_errors(cls, params: Mapping[str, Any]) -> list[str]:
        """Return every problem with an alias's settings, without network I/O."""
        options = option_errors(params.get("OPTIONS", {}), cls.option_schema)
        return alias_key_errors(params) + options + cls.location_errors(params)

    @classmethod
    def location_errors(cls, params: Mapping[str, Any]) -> list[str]:
        """Return problems with ``LOCATION`` (no network I/O); backends override this."""
        return []

    def check(self, **kwargs: Any) -> list[checks.CheckMessage]:
        """Backend-specific system checks; must do no network I/O."""
        return []

    def ping(self) -> bool:
        """Return True when the store answers; raise ``ConnectionFailed`` when it does not."""
        raise NotImplementedError(f"{type(self).__name__} does not implement ping()")

    def close(self) -> None:
        """Release the backend's connections; it reconnects on next use."""

    def __repr__(self) -> str:
        return f"<{type(self).__name__} alias={self.alias!r}>"


class BaseLockBackend(BaseBackend):
    """A source of distributed locks.

    ``lock(name, ttl=None, timeout=None, reentrant=False, owner=None, ...)``
    returns a lock object with ``acquire``/``release``/``extend``/``locked``/
    ``owned``/``ensure_held``, ``fence``, and both ``with`` and ``async with``.
    """

    settings_name = "REDISLOCK_LOCKS"

    #: Reentrant locks (``lock(name, reentrant=True)``), counted per owner.
    supports_reentrant: ClassVar[bool] = False
    #: ``read_write_lock(name)``.
    supports_read_write: ClassVar[bool] = False
    #: ``held_locks()`` lists held locks for the admin and commands.
    supports_listing: ClassVar[bool] = False
    #: Semaphores and fair locks are listed (``locking.coordindex``) and can be force-released.
    supports_coordination: ClassVar[bool] = False

    def lock(
        self,
        name: str,
        *,
        ttl: float | None = None,
        timeout: float | None = None,
        blocking: bool = True,
        reentrant: bool = False,
        owner: str | None = None,
        watchdog: bool | None = None,
        on_lost: Callable[[Any], None] | None = None,
    ) -> Lock:
        """Return a lock object for ``name`` (not yet acquired)."""
        raise NotImplementedError(f"{type(self).__name__} does not implement lock()")

    def read_write_lock(self, name: str, **defaults: Any) -> ReadWriteLock:
        """Return a read-write lock for ``name``; see ``supports_read_write``."""
        raise NotImplementedError(f"{type(self).__name__} does not support read-write locks")

    def rate_limiter(
        self, name: str, rate: str, *, burst: int | None = None, local_refusals: bool = True
    ) -> RateLimiter:
        """Return a rate limiter ``name`` admitting ``rate`` (``"20/s"``) across processes."""
        raise NotImplementedError(f"{type(self).__name__} does not support rate limiters")

    def semaphore(
        self, name: str, permits: int = 5, *, ttl: float | None = None, **defaults: Any
    ) -> Semaphore:
        """Return a semaphore ``name`` of ``permits`` leased permits across processes."""
        raise NotImplementedError(f"{type(self).__name__} does not support semaphores")

    def fair_lock(
        self,
        name: str,
        *,
        ttl: float | None = None,
        timeout: float | None = None,
        blocking: bool = True,
        watchdog: bool | None = None,
        on_lost: Callable[[Any], None] | None = None,
        wait_lease: float | None = None,
    ) -> FairLock:
        """Return a fair lock ``name`` (a mutex granted in arrival order)."""
        raise NotImplementedError(f"{type(self).__name__} does not support fair locks")

    def latch(self, name: str, *, count: int, ttl: float | None = None) -> CountDownLatch:
        """Return a count-down latch ``name`` opening after ``count`` count-downs."""
        raise NotImplementedError(f"{type(self).__name__} does not support latches")

    def force_release(self, name: str, fence: int | None = None) -> bool:
        """End any hold on ``name`` whoever owns it, bumping its fence; True if one ended.

        With ``fence``, only the hold with that fence is ended: a confirmation
        made while looking at one hold never ends the next one.
        """
        raise NotImplementedError(f"{type(self).__name__} does not implement force_release()")

    def held_locks_page(
        self,
        prefix: str = "",
        limit: int = 100,
        after: str | None = None,
        before: str | None = None,
    ) -> LockPage:
        """One page of held locks (``.locks``, both cursors, the total); ``supports_listing``.

        Pages are keyset pages by name, never offsets, so a page costs the same
        anywhere in a long listing: ``after=page.next_after`` is the next page,
        ``before=page.previous_before`` the previous one (the ``limit`` names
        just below that name, still in name order). ``after`` and ``before``
        together raise :class:`~django_redislock.exceptions.InvalidArgument`.
        """
        raise NotImplementedError(f"{type(self).__name__} does not list held locks")

    def held_locks(
        self,
        prefix: str = "",
        limit: int = 100,
        after: str | None = None,
        before: str | None = None,
    ) -> list[HeldLock]:
        """Held locks whose name starts with ``prefix``, in name order, after ``after``.

        With ``before`` instead, the last ``limit`` of them below that name.
        """
        return list(self.held_locks_page(prefix, limit, after, before).locks)

    def held_lock_count(self) -> int:
        """How many locks are held on this alias."""
        return int(self.held_locks_page(limit=0).total)


class BaseQueueBackend(BaseBackend):
    """A source of reliable task queues: ``queue(name)`` returns a ``Queue``."""

    settings_name = "REDISLOCK_QUEUES"

    def queue(self, name: str) -> Queue:
        """Return the queue called ``name`` (created on first enqueue)."""
        raise NotImplementedError(f"{type(self).__name__} does not implement queue()")

    def queue_names(self) -> list[str]:
        """Return the names of the queues that hold tasks or are declared."""
        raise NotImplementedError(f"{type(self).__name__} does not list queues")
