"""django-redislock: distributed locks and a reliable task queue on Redis for Django.

Public entry points::

    from django_redislock import locks, queues, task, periodic_task, distributed_lock
"""

from __future__ import annotations

# The subpackage ``locks`` (the lock classes) shares its name with the ``locks`` handler, and
# importing a subpackage binds its name on this package: import it first so that the handler
# bound below wins (tests/test_package.py guards this).
from . import locks as _lock_classes  # noqa: F401
from .decorators import distributed_lock
from .handlers import locks, queues
from .periodic import periodic_task
from .queue.registry import task

__all__ = ["distributed_lock", "locks", "periodic_task", "queues", "task"]
__version__ = "0.1.0"
