"""django-redislock: distributed locks and a reliable task queue on Redis for Django.

Public entry points::

    from django_redislock import locks, queues, task, periodic_task, distributed_lock
"""

from __future__ import annotations

from ._moved import alias_module
from .decorators import distributed_lock
from .handlers import locks, queues
from .periodic import periodic_task
from .queue.registry import task

# The lock classes live in ``locking``; ``django_redislock.locks`` is the handler, and
# the old ``django_redislock.locks.<name>`` imports are forwarded with a warning for one release.
alias_module("django_redislock.locks", "django_redislock.locking")

__all__ = ["distributed_lock", "locks", "periodic_task", "queues", "task"]
__version__ = "0.1.0"
