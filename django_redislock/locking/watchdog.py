"""The per-process renewal scheduler ("watchdog") for locks taken without an explicit TTL.

One daemon thread per process renews every registered hold when a third of its
TTL has passed, batching all holds due at the same moment into one pipeline per
backend (redis-py's cluster pipeline sends one request per master). When a
renewal finds the hold gone, the lock is told: ``lock_lost`` is sent, the
lock's ``on_lost`` callback runs, and ``ensure_held()``/``release()`` raise
:class:`~django_redislock.exceptions.LockLost` from then on.

The thread lives as long as the process and is a daemon (it never keeps the
interpreter from exiting). It sleeps until the next renewal it has planned; a
registration wakes it only when its hold is due before that moment, so holds
taken and released back to back (each due a third of a TTL later than the last
plan) cost a registration and no wake-up. With nothing registered when its
planned moment comes, it parks until the next registration. Starting a thread
per hold, as it once did, halved the rate of the default lock.

Fork safety: a child process starts with an empty registry and no thread (an
``os.register_at_fork`` hook and a pid check), so it never renews the holds of
its parent, which the parent still owns; its first registration starts its own.
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time
from collections import defaultdict
from typing import Any

import redis

from .. import connections
from ..exceptions import ConnectionFailed
from .pipeline import run_scripts

logger = logging.getLogger("django_redislock.locks")

#: Renew when this fraction of the TTL has passed.
RENEW_FRACTION = 1 / 3
#: Seconds to wait at most before retrying after Redis could not be reached.
RETRY_SECONDS = 0.5


def _retry_after(lock: Any) -> float:
    """A failed renewal is retried within the lock's renewal period, so a short TTL survives it."""
    return min(RETRY_SECONDS, float(lock.ttl) * RENEW_FRACTION)


class Watchdog:
    """Renews registered locks from one background thread."""

    def __init__(self) -> None:
        self._locks: dict[int, Any] = {}
        # the condition's lock, taken directly where nothing waits (Condition.__enter__ is
        # Python code, and a default lock's cycle registers once)
        self._mutex = threading.Lock()
        self._cond = threading.Condition(self._mutex)
        self._thread: threading.Thread | None = None
        #: the thread is running ``_run`` (False once it returned or raised)
        self._running = False
        self._pid = os.getpid()
        #: when the thread wakes next (monotonic; inf: parked until a registration)
        self._wake_at = math.inf
        #: threads this process's watchdog started (one, unless it forked or one died)
        self.started = 0

    def register(self, lock: Any) -> None:
        """Start renewing ``lock`` (its current hold) until it is unregistered."""
        with self._mutex:
            if self._generation != connections._forks:  # connections.fork_generation()
                self._after_fork_check()
            hold = lock._hold
            if hold is None:
                return
            renew_at = hold.renew_at = time.monotonic() + lock.ttl * RENEW_FRACTION
            self._locks[id(lock)] = lock
            if not self._running:
                self._thread = threading.Thread(
                    target=self._run, name="redislock-watchdog", daemon=True
                )
                self._wake_at = renew_at
                self.started += 1
                self._running = True
                self._thread.start()
            elif renew_at < self._wake_at:
                self._wake_at = renew_at  # the thread's plan from now on
                self._cond.notify()

    def unregister(self, lock: Any) -> None:
        """Stop renewing ``lock`` (after a release, or once it is known lost).

        No lock is taken: the pop is atomic, the thread reads a snapshot of the registry,
        and a renewal already on its way for this hold is dropped by :meth:`_renewed`
        (the hold is releasing or gone). A hold taken and released per request pays two
        registry updates, not two waits for the thread's lock.
        """
        self._locks.pop(id(lock), None)

    def registered(self) -> int:
        """How many locks this process's watchdog renews."""
        with self._cond:
            self._after_fork_check()
            return len(self._locks)

    def reset(self) -> None:
        """Forget every lock and the thread (in a forked child)."""
        self._mutex = threading.Lock()
        self._cond = threading.Condition(self._mutex)
        self._locks = {}
        self._thread = None
        self._running = False
        self._pid = os.getpid()
        self._generation = connections._forks
        self._wake_at = math.inf
        self.started = 0

    #: :func:`~django_redislock.connections.fork_generation` when the registry was last
    #: checked against the pid: a registration looks up the pid (a system call) only after
    #: a fork, which the ``register_at_fork`` hooks count.
    _generation = -1

    def _after_fork_check(self) -> None:
        if self._pid != os.getpid():
            self._locks, self._thread, self._pid = {}, None, os.getpid()
            self._wake_at, self.started, self._running = math.inf, 0, False
        self._generation = connections._forks

    def _run(self) -> None:
        try:
            while True:
                with self._cond:
                    if self._pid != os.getpid():
                        return  # the parent's thread does not run in a child; only a guard
                    due = self._due_or_wait()
                if due:
                    self._renew(due)
        finally:
            with self._mutex:
                if threading.current_thread() is self._thread:
                    self._running = False  # the next registration starts a thread

    def _due_or_wait(self) -> list[tuple[Any, Any]]:
        """The (lock, hold) pairs due now, or [] after waiting until the planned moment.

        With nothing registered, the plan stays: a registration due later than it needs
        no wake-up. Once the planned moment passed with nothing registered, the thread
        parks (``_wake_at`` is infinite) until a registration notifies it.
        """
        now = time.monotonic()
        # a snapshot (one C call, so atomic): unregister() pops without the condition's lock
        pairs = [(lock, lock._hold) for lock in list(self._locks.values())]
        pairs = [(lock, hold) for lock, hold in pairs if hold is not None]
        due = [(lock, hold) for lock, hold in pairs if hold.renew_at <= now]
        if due:
            return due
        if pairs:
            self._wake_at = min(hold.renew_at for _, hold in pairs)
        elif self._wake_at <= now:
            self._wake_at = math.inf
        self._cond.wait(timeout=None if self._wake_at == math.inf else self._wake_at - now)
        return []

    def _renew(self, due: list[tuple[Any, Any]]) -> None:
        by_backend: dict[int, list[tuple[Any, Any]]] = defaultdict(list)
        for lock, hold in due:
            by_backend[id(lock.backend)].append((lock, hold))
        for pairs in by_backend.values():
            try:
                backend = pairs[0][0].backend
                renew_locks = getattr(backend, "renew_locks", None)  # e.g. Redlock: by quorum
                if renew_locks is not None:
                    results = renew_locks(pairs)
                else:
                    results = run_scripts(backend, [lock.renew_call(h) for lock, h in pairs])
            except (redis.RedisError, ConnectionFailed) as exc:
                logger.warning("lock renewal failed, retrying: %s", exc)
                for lock, hold in pairs:
                    hold.renew_at = time.monotonic() + _retry_after(lock)
                continue
            for (lock, hold), result in zip(pairs, results, strict=True):
                self._renewed(lock, hold, result)

    def _renewed(self, lock: Any, hold: Any, result: Any) -> None:
        if lock._hold is not hold or hold.releasing:
            return  # released (or being released) while the renewal was on its way
        if isinstance(result, Exception) or int(result) <= 0:
            if isinstance(result, Exception):
                logger.warning("renewal of lock %r failed: %s", lock.name, result)
                hold.renew_at = time.monotonic() + _retry_after(lock)
                return
            self.unregister(lock)
            lock._report_lost(hold)
            return
        hold.renew_at = time.monotonic() + lock.ttl * RENEW_FRACTION


#: The watchdog of this process.
watchdog = Watchdog()

if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=watchdog.reset)
