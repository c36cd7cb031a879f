"""Distributed locks on Redis: mutex, reentrant, read-write, fair; fencing, wake-up, watchdog.

Build them from a backend::

    from django_redislock import locks

    with locks["default"].lock("order:42", ttl=10) as lock:
        ...  # lock.fence is this grant's fencing token

    with locks["default"].lock("job", reentrant=True): ...
    rw = locks["default"].read_write_lock("doc:7")
    with rw.read(): ...
    with rw.write(): ...
    with locks["default"].semaphore("exports", permits=5) as permit: ...
    with locks["default"].fair_lock("report"): ...  # granted in arrival order
    locks["default"].latch("batch:7", count=10).wait(timeout=60)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import lazy_exports

# ``watchdog`` is both a submodule and the function exported here: importing the submodule
# (the mutex does) would set the package's attribute to the module, so it is bound now.
from .watchdog import watchdog

if TYPE_CHECKING:  # imported on first use (see __getattr__)
    from .base import BaseLock
    from .fair import FairLock
    from .fencing import fenced_update
    from .index import HeldLock, LockPage
    from .latch import CountDownLatch
    from .mutex import Lock
    from .readwrite import ReadLock, ReadWriteLock, WriteLock
    from .semaphore import Permit, Semaphore

#: exported name -> its submodule, imported on first use: a worker process (which imports
#: this package for ``locking.keys`` and ``locking.pipeline``) needs none of the lock classes
_EXPORTS = {
    "BaseLock": ".base",
    "CountDownLatch": ".latch",
    "FairLock": ".fair",
    "HeldLock": ".index",
    "Lock": ".mutex",
    "LockPage": ".index",
    "Permit": ".semaphore",
    "ReadLock": ".readwrite",
    "ReadWriteLock": ".readwrite",
    "Semaphore": ".semaphore",
    "WriteLock": ".readwrite",
    "fenced_update": ".fencing",
}


__getattr__ = lazy_exports(__name__, _EXPORTS)


__all__ = [
    "BaseLock",
    "CountDownLatch",
    "FairLock",
    "HeldLock",
    "Lock",
    "LockPage",
    "Permit",
    "ReadLock",
    "ReadWriteLock",
    "Semaphore",
    "WriteLock",
    "fenced_update",
    "watchdog",
]
