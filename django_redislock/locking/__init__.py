"""Distributed locks on Redis: mutex, reentrant, read-write; fencing, wake-up, watchdog.

Build them from a backend::

    from django_redislock import locks

    with locks["default"].lock("order:42", ttl=10) as lock:
        ...  # lock.fence is this grant's fencing token

    with locks["default"].lock("job", reentrant=True): ...
    rw = locks["default"].read_write_lock("doc:7")
    with rw.read(): ...
    with rw.write(): ...
"""

from __future__ import annotations

from .base import BaseLock
from .fencing import fenced_update
from .index import HeldLock, LockPage
from .mutex import Lock
from .readwrite import ReadLock, ReadWriteLock, WriteLock
from .watchdog import watchdog

__all__ = [
    "BaseLock",
    "HeldLock",
    "Lock",
    "LockPage",
    "ReadLock",
    "ReadWriteLock",
    "WriteLock",
    "fenced_update",
    "watchdog",
]
