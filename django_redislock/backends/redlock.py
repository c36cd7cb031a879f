"""The Redlock backend: mutexes on a quorum of independent Redis masters.

::

    REDISLOCK_LOCKS = {
        "quorum": {
            "BACKEND": "django_redislock.backends.redlock.RedlockBackend",
            "LOCATION": ["redis://a:6379/0", "redis://b:6379/0", "redis://c:6379/0",
                         "redis://d:6379/0", "redis://e:6379/0"],
            "OPTIONS": {"MAX_TTL": 60.0},
        },
    }

The masters are independent (no replication, no cluster between them): a lock
survives the loss of any minority of them. Every call fans out to all masters
in parallel (from a small thread pool; the asyncio methods concurrently on the
running event loop, with one asyncio client per master) and is decided by a
quorum of ``N // 2 + 1``. What it does not support, and says so with its capability
flags: reentrant locks and read-write locks. See ``docs/scale.md``.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Awaitable, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, TypeVar

from django.core import checks

from ..calls.node import KeyNames
from ..conf import CONNECTION_OPTIONS, LOCK_OPTIONS, REDLOCK_OPTIONS
from ..connections import location_errors as url_errors
from ..connections import redact
from ..exceptions import ConnectionFailed
from ..locking.index import LockPage, force_release_call
from .base import BaseLockBackend

if TYPE_CHECKING:
    from ..redlock.lock import RedlockLock

T = TypeVar("T")

#: The Redis lock backend's options that mean the same here (no replicas: no WAIT options).
REDLOCK_LOCK_KEYS = ("DEFAULT_TTL", "DEFAULT_TIMEOUT", "LOCK_INDEX_BUCKETS", "EVICTION_CHECK")
#: Schemes a Redlock master may use (one plain server each).
MASTER_SCHEMES = ("redis://", "rediss://", "unix://")


class RedlockBackend(KeyNames, BaseLockBackend):
    """Mutexes granted by a quorum of independent masters (LOCATION: a list of URLs)."""

    option_schema = {
        "CLIENT_KWARGS": CONNECTION_OPTIONS["CLIENT_KWARGS"],
        "SOCKET_TIMEOUT": CONNECTION_OPTIONS["SOCKET_TIMEOUT"],
        **{key: LOCK_OPTIONS[key] for key in REDLOCK_LOCK_KEYS},
        **REDLOCK_OPTIONS,
    }
    supports_reentrant = False
    supports_read_write = False
    supports_listing = True

    def __init__(self, alias: str, params: Mapping[str, Any]) -> None:
        super().__init__(alias, params)
        from ..redlock.masters import Master

        self.masters = [Master(self, url) for url in self.location]
        self.quorum = len(self.masters) // 2 + 1
        self._pool: tuple[int, ThreadPoolExecutor] | None = None
        self._pool_lock = threading.Lock()

    @classmethod
    def location_errors(cls, params: Mapping[str, Any]) -> list[str]:
        """LOCATION must list at least three distinct plain-server URLs."""
        location = params.get("LOCATION")
        if not isinstance(location, (list, tuple)) or len(location) < 3:
            return [
                f"LOCATION of a Redlock alias must be a list of at least 3 independent master "
                f"URLs, got {redact(location) if location else location!r}"
            ]
        errors = []
        for url in location:
            if not isinstance(url, str) or not url.startswith(MASTER_SCHEMES):
                errors.append(
                    f"Redlock master {url!r} must be a redis://, rediss:// or unix:// URL"
                )
            else:
                errors += url_errors(url, {})
        if len(set(location)) != len(location):
            errors.append("LOCATION lists the same Redlock master twice")
        return errors

    def check(self, **kwargs: Any) -> list[checks.CheckMessage]:
        """Warn (redislock.W003) about an even number of masters: it buys no extra safety."""
        if len(self.masters) % 2:
            return []
        return [
            checks.Warning(
                f"{self.settings_name}[{self.alias!r}] lists {len(self.masters)} Redlock "
                f"masters; a quorum of {self.quorum} tolerates as many failures as "
                f"{len(self.masters) - 1} masters would.",
                hint="Use an odd number of independent masters (3 or 5).",
                id="redislock.W003",
            )
        ]

    def each(
        self, func: Callable[[Any], T], masters: list[Any] | None = None
    ) -> list[T | Exception]:
        """Run ``func(master)`` on all masters (or ``masters``) in parallel.

        Returns one result per master, in order; an exception is that master's result.
        """
        chosen = self.masters if masters is None else masters
        futures = [self._executor().submit(func, master) for master in chosen]
        results: list[T | Exception] = []
        for future in futures:
            try:
                results.append(future.result())
            except Exception as exc:
                results.append(exc)
        return results

    async def each_async(
        self, func: Callable[[Any], Awaitable[T]], masters: list[Any] | None = None
    ) -> list[T | Exception]:
        """The asyncio twin of :meth:`each`: ``func(master)`` for all masters, concurrently.

        An exception is that master's result; a cancellation cancels every call.
        """
        chosen = self.masters if masters is None else masters

        async def one(master: Any) -> T | Exception:
            try:
                return await func(master)
            except Exception as exc:
                return exc

        return list(await asyncio.gather(*(one(master) for master in chosen)))

    def _executor(self) -> ThreadPoolExecutor:
        pool = self._pool
        if pool is None or pool[0] != os.getpid():
            with self._pool_lock:
                pool = self._pool
                if pool is None or pool[0] != os.getpid():
                    workers = 4 * len(self.masters)
                    executor = ThreadPoolExecutor(workers, thread_name_prefix="redlock")
                    pool = self._pool = (os.getpid(), executor)
        return pool[1]

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
    ) -> RedlockLock:
        """A mutex called ``name`` held on a quorum, not yet acquired (see RedisLockBackend.lock).

        ``ttl`` may not exceed ``OPTIONS['MAX_TTL']``; ``reentrant=True`` is refused.
        """
        from ..redlock.lock import RedlockLock

        return RedlockLock(
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

    def renew_locks(self, pairs: list[tuple[Any, Any]]) -> list[Any]:
        """The watchdog's renewals: one quorum extension per (lock, hold)."""
        return [lock.renew_result(hold) for lock, hold in pairs]

    def force_release(self, name: str, fence: int | None = None) -> bool:
        """End any hold on ``name`` (with ``fence``: only that hold) on every master.

        Bumps the fences; True if a hold ended.
        """
        results = self.each(lambda master: master.run(force_release_call(master, name, fence)))
        answered = [r for r in results if not isinstance(r, Exception)]
        if len(answered) < self.quorum:
            raise ConnectionFailed(
                f"only {len(answered)} Redlock masters of {self.settings_name}[{self.alias!r}] "
                f"answered the force-release of {name!r}"
            )
        return any(int(r) > 0 for r in answered)

    def held_locks_page(
        self,
        prefix: str = "",
        limit: int = 100,
        after: str | None = None,
        before: str | None = None,
    ) -> LockPage:
        """Like :meth:`held_locks`, with the cursors of the pages beside it and the number held."""
        from ..redlock.listing import merged_page

        return merged_page(self, prefix, limit, after, before)

    def ping(self) -> bool:
        """True when a quorum of masters answers; raise :class:`ConnectionFailed` otherwise."""
        replies = self.each(lambda master: master.client.ping())
        answered = sum(1 for r in replies if not isinstance(r, Exception))
        if answered < self.quorum:
            raise ConnectionFailed(
                f"only {answered} of {len(self.masters)} Redlock masters of "
                f"{self.settings_name}[{self.alias!r}] answered; a quorum is {self.quorum}"
            )
        return True

    def close(self) -> None:
        """Drop the masters' clients and this process's thread pool; both come back on use."""
        for master in self.masters:
            master.reset()
        with self._pool_lock:
            pool, self._pool = self._pool, None
        if pool is not None and pool[0] == os.getpid():
            pool[1].shutdown(wait=False)
