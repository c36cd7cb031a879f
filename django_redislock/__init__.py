"""django-redislock: distributed locks and a reliable task queue on Redis for Django.

Public entry points::

    from django_redislock import locks, queues, task, distributed_lock
"""

from __future__ import annotations

from .decorators import distributed_lock
from .handlers import locks, queues
from .queue.registry import task

__all__ = ["distributed_lock", "locks", "queues", "task"]
__version__ = "0.1.0"
