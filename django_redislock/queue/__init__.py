"""The reliable task queue: :class:`Queue`, :class:`Task`, the ``@task`` registry, the worker.

(The package is named ``queue``, not ``queues``: a subpackage called ``queues`` would
replace the ``django_redislock.queues`` handler attribute as soon as it is imported.)
"""

from __future__ import annotations

from ..backends.redis import register_queue_class
from .queue import Queue
from .records import DEAD, DELAYED, IN_FLIGHT, READY, STATES, Claim, Entry, Task

# ``queues[alias].queue(name)`` builds this class; the backend does not import the queue layer.
register_queue_class(Queue)

__all__ = ["DEAD", "DELAYED", "IN_FLIGHT", "READY", "STATES", "Claim", "Entry", "Queue", "Task"]
