"""The Redis lock and queue backends (single server, Cluster, Sentinel).

The Django-facing side lives here (aliases, key prefix, options); the Redis
calls live in the lock and queue modules, which receive this backend and use
:meth:`RedisBackendMixin.client`, :meth:`RedisBackendMixin.key` and
:meth:`RedisBackendMixin.script`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from django.core import checks

from ..calls.node import NodeBase
from ..conf import (
    CONNECTION_OPTIONS,
    DEFAULT_LOCATION,
    LOCK_OPTIONS,
    QUEUE_OPTIONS,
    heartbeat_errors,
    option_limit_errors,
    with_defaults,
)
from ..connections import (
    AsyncClient,
    Client,
    ClientCache,
    create_async_client,
    create_client,
    location_errors,
    redact,
)
from ..wire import to_text
from .base import BaseLockBackend, BaseQueueBackend

if TYPE_CHECKING:
    from ..locking import Lock, LockPage, ReadWriteLock
    from ..locking.fair import FairLock
    from ..locking.latch import CountDownLatch
    from ..locking.limiter import RateLimiter
    from ..locking.semaphore import Semaphore
    from ..queue.queue import Queue


def _lock_class() -> type[Lock]:
    """:class:`~django_redislock.locking.Lock`, imported on first use (the locking package
    imports the backends' base classes); a lock object is built per call in the README's
    idiom, and an import statement there cost a tenth of building one."""
    global _LOCK_CLASS
    if _LOCK_CLASS is None:
        from ..locking import Lock

        _LOCK_CLASS = Lock
    return _LOCK_CLASS


_LOCK_CLASS: type[Lock] | None = None


class RedisBackendMixin(NodeBase):
    """Connections, key names and scripts shared by the Redis lock and queue backends."""

    alias: str
    settings_name: str
    location: Any
    key_prefix: str
    options: dict[str, Any]

    def __init__(self, alias: str, params: Mapping[str, Any]) -> None:
        super().__init__(alias, params)  # type: ignore[call-arg]
        self._clients = ClientCache(self._make_client)
        self._scripts = {}

    def _make_client(self, asynchronous: bool) -> Client | AsyncClient:
        if asynchronous:
            return create_async_client(self.location, self.options)
        return create_client(self.location, self.options)

    @classmethod
    def location_errors(cls, params: Mapping[str, Any]) -> list[str]:
        """Return problems with ``LOCATION`` given ``OPTIONS`` (no network I/O)."""
        options = params.get("OPTIONS", {})
        return location_errors(
            params.get("LOCATION", DEFAULT_LOCATION),
            options if isinstance(options, Mapping) else {},
        )

    @property
    def client(self) -> Client:
        """The blocking redis-py client of this alias in this process."""
        return self._clients.get()

    def async_client(self) -> AsyncClient:
        """The asyncio client of this alias for the running event loop."""
        return self._clients.get_async()

    @property
    def is_cluster(self) -> bool:
        """True when the client is a RedisCluster (keys must share a hash tag per script)."""
        return bool(self.options["CLUSTER"])

    def unreachable(self, exc: Exception) -> str:
        return (
            f"Redis at {redact(self.location)} is unreachable for "
            f"{self.settings_name}[{self.alias!r}] ({exc}). Set "
            f"{self.settings_name}[{self.alias!r}]['LOCATION'] to a running server, or to "
            f"'embedded:///some/dir' for development."
        )

    def ping(self) -> bool:
        """Return True when the server answers; raise :class:`ConnectionFailed` otherwise."""
        with self.errors():
            return bool(self.client.ping())

    def close(self) -> None:
        self._clients.reset()
        self._scripts = {}


class RedisLockBackend(RedisBackendMixin, BaseLockBackend):
    """Locks on one Redis deployment (a server, a Cluster, or a Sentinel-managed master).

    The lock kinds live in :mod:`django_redislock.locking`; this class builds them
    and holds the admin operations (listing, counting, force-release).
    """

    option_schema = {**CONNECTION_OPTIONS, **LOCK_OPTIONS}
    supports_reentrant = True
    supports_read_write = True
    supports_listing = True
    supports_coordination = True

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
        """A mutex (or reentrant lock) called ``name``, not yet acquired.

        ``ttl`` defaults to ``OPTIONS['DEFAULT_TTL']``; without an explicit ``ttl``
        the watchdog renews the hold until release (``watchdog=`` overrides).
        ``timeout`` is how long ``with``/``acquire()`` wait (``DEFAULT_TIMEOUT``).
        ``owner`` names the holder explicitly (reentrancy key, release elsewhere).
        ``on_lost(lock)`` is called from the watchdog thread when the hold is lost.
        """
        return _lock_class()(
            self,
            name,
            ttl=ttl,
            timeout=timeout,
            blocking=blocking,
            reentrant=reentrant,
            owner=owner,
            watchdog=watchdog,
            on_lost=on_lost,
        )

    def read_write_lock(self, name: str, **defaults: Any) -> ReadWriteLock:
        """A read-write lock called ``name``; ``defaults`` (ttl, timeout, ...) apply to holds."""
        from ..locking import ReadWriteLock

        return ReadWriteLock(self, name, **defaults)

    def rate_limiter(
        self, name: str, rate: str, *, burst: int | None = None, local_refusals: bool = True
    ) -> RateLimiter:
        """A rate limiter ``name`` admitting ``rate`` (``"20/s"``, ``"100/m"``) per key across
        every process; ``burst`` units at once (default: a tenth of a second's worth).
        ``local_refusals=False`` asks Redis for every decision (see :mod:`.locking.known`)."""
        from ..locking.limiter import RateLimiter

        return RateLimiter(self, name, rate, burst=burst, local_refusals=local_refusals)

    def semaphore(
        self, name: str, permits: int = 5, *, ttl: float | None = None, **defaults: Any
    ) -> Semaphore:
        """A semaphore ``name`` of ``permits`` leased permits shared by every process.

        ``acquire()`` returns a :class:`~django_redislock.locking.Permit` with its own id,
        ``ttl`` (default ``OPTIONS['DEFAULT_TTL']``, renewed by the watchdog when not given)
        and fence; ``defaults`` (``timeout``, ``blocking``, ``watchdog``, ``on_lost``,
        ``owner``) apply to its permits as to a lock.
        """
        from ..locking.semaphore import Semaphore

        return Semaphore(self, name, permits, ttl=ttl, **defaults)

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
        """A fair lock ``name``: a mutex granted in arrival order across processes.

        The arguments are the mutex's (see :meth:`lock`); ``wait_lease`` (seconds, default
        2) is how long a queued waiter whose process died keeps its place.
        """
        from ..locking.fair import WAIT_LEASE, FairLock

        return FairLock(
            self,
            name,
            ttl=ttl,
            timeout=timeout,
            blocking=blocking,
            watchdog=watchdog,
            on_lost=on_lost,
            wait_lease=WAIT_LEASE if wait_lease is None else wait_lease,
        )

    def latch(self, name: str, *, count: int, ttl: float | None = None) -> CountDownLatch:
        """A count-down latch ``name`` that opens after ``count`` count-downs; kept for
        ``ttl`` seconds (default a day) after its last change."""
        from ..locking.latch import LATCH_TTL, CountDownLatch

        return CountDownLatch(self, name, count=count, ttl=LATCH_TTL if ttl is None else ttl)

    def force_release(self, name: str, fence: int | None = None) -> bool:
        """End any hold on ``name`` (with ``fence``: only that hold), bumping the fence.

        True if a hold ended.
        """
        from ..locking.index import force_release_call
        from ..locking.pipeline import run_scripts

        (result,) = run_scripts(self, [force_release_call(self, name, fence)])
        if isinstance(result, Exception):
            raise result
        return int(result) > 0

    def held_locks_page(
        self,
        prefix: str = "",
        limit: int = 100,
        after: str | None = None,
        before: str | None = None,
    ) -> LockPage:
        """Like :meth:`held_locks`, with the cursors of the pages beside it and the total count."""
        from ..locking.index import page

        return page(self, prefix, limit, after, before)

    def held_lock_count(self) -> int:
        """How many locks are held on this alias."""
        from ..locking.index import count

        return count(self)


class RedisQueueBackend(RedisBackendMixin, BaseQueueBackend):
    """Reliable queues on sorted sets of one Redis deployment.

    Queue names are recorded in one set per alias (``<prefix>:{queues}:names``)
    the first time this process enqueues to them, so status commands and the
    admin list queues without ``KEYS`` or ``SCAN``, on a Cluster too.
    """

    option_schema = {**CONNECTION_OPTIONS, **QUEUE_OPTIONS}
    #: What :meth:`queue` builds, as ``queue_class(backend, name)``; set by
    #: :func:`register_queue_class`. The queue package sits above the backends: it knows
    #: this class, this class does not import it.
    queue_class: ClassVar[Callable[[RedisQueueBackend, str], Queue] | None] = None

    def __init__(self, alias: str, params: Mapping[str, Any]) -> None:
        super().__init__(alias, params)
        self._queues: dict[str, Queue] = {}
        self._registered_pid = os.getpid()
        #: Queue names this process has recorded in :attr:`names_key` (a fork starts afresh).
        self.registered: set[str] = set()

    @classmethod
    def config_errors(cls, params: Mapping[str, Any]) -> list[str]:
        """The base checks, then the time-limit options as a pair and the heartbeat TTL
        against its interval."""
        errors = super().config_errors(params)
        options = params.get("OPTIONS", {})
        if errors:
            return errors
        options = options if isinstance(options, Mapping) else {}
        return option_limit_errors(with_defaults(options, cls.option_schema)) or heartbeat_errors(
            options
        )

    def queue(self, name: str) -> Queue:
        """Return the :class:`~django_redislock.queue.Queue` called ``name`` (one per name).

        The class is the one the queue package registered with
        :func:`register_queue_class` when it was imported; importing
        ``django_redislock`` imports it, so it is always there by the time a backend exists.
        """
        found = self._queues.get(name)
        if found is None:
            queue_class = type(self).queue_class
            if queue_class is None:
                raise RuntimeError(
                    "no queue class is registered: import django_redislock.queue before "
                    "building queues"
                )
            found = self._queues[name] = queue_class(self, name)
        return found

    @property
    def names_key(self) -> str:
        """The set of queue names of this alias."""
        return self.key("queues", "names")

    def queue_names(self) -> list[str]:
        """Names of the queues this alias has seen enqueued to, sorted."""
        with self.errors():
            members = self.client.smembers(self.names_key)
        return sorted(to_text(m) for m in members)

    def _needs_registering(self, name: str) -> bool:
        if self._registered_pid != os.getpid():
            self._registered_pid, self.registered = os.getpid(), set()
        return name not in self.registered

    def register_queue(self, name: str) -> None:
        """Record ``name`` in the alias's queue list (once per process)."""
        if self._needs_registering(name):
            with self.errors():
                self.client.sadd(self.names_key, name)
            self.registered.add(name)

    async def register_queue_async(self, name: str) -> None:
        """The asyncio twin of :meth:`register_queue`."""
        if self._needs_registering(name):
            with self.errors():
                await self.async_client().sadd(self.names_key, name)
            self.registered.add(name)

    def forget_queue(self, name: str) -> None:
        """Drop ``name`` from the queue list (after a purge, for example)."""
        with self.errors():
            self.client.srem(self.names_key, name)
        self.registered.discard(name)

    def check(self, **kwargs: Any) -> list[checks.CheckMessage]:
        """Warn (redislock.W002) when payloads are pickled."""
        if self.options["SERIALIZER"] != "pickle":
            return []
        return [
            checks.Warning(
                f"{self.settings_name}[{self.alias!r}] stores task payloads with pickle.",
                hint="Anyone who can write to this Redis can run code in your workers. Use the "
                "default 'json' serializer unless every writer is trusted.",
                id="redislock.W002",
            )
        ]


def register_queue_class(queue_class: Callable[[RedisQueueBackend, str], Queue]) -> None:
    """Make ``queue_class(backend, name)`` what :meth:`RedisQueueBackend.queue` builds.

    The queue package calls this when it is imported, as Django's contrib apps register
    what the core looks up, so the backends never import the layer above them.
    Queues built before a new registration keep their class (they are cached per name).
    """
    RedisQueueBackend.queue_class = queue_class
