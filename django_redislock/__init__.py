"""django-redislock: distributed locks and a reliable task queue on Redis for Django.

Public entry points::

    from django_redislock import locks, queues, task, periodic_task, distributed_lock

They are imported on first use (PEP 562 ``__getattr__``), not with the package: Django
imports every installed app's package in ``django.setup()``, and a worker process
(``drain_queue``) needs the queue's modules only, not the lock decorators, the periodic
scheduler or the seckill stock. See docs/workers.md, "Start-up". Only the queue package is
imported with this one: it registers the queue class that the backends build (a worker
needs it first, and any process that builds a queue needs it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import queue as _queue  # noqa: F401  (registers the queue class with the backends)
from ._moved import alias_module
from .lazy import lazy_exports

if TYPE_CHECKING:  # what the names are, for the type checker; imported on first use
    from .decorators import distributed_lock, rate_limited
    from .exceptions import Retry, TaskCancelled
    from .handlers import locks, queues
    from .periodic import periodic_task
    from .queue.canvas import chain, chord, group
    from .queue.control import current_task
    from .queue.registry import task

#: public name -> the module that defines it
_EXPORTS = {
    "distributed_lock": ".decorators",
    "locks": ".handlers",
    "queues": ".handlers",
    "periodic_task": ".periodic",
    "rate_limited": ".decorators",
    "task": ".queue.registry",
    "chain": ".queue.canvas",
    "group": ".queue.canvas",
    "chord": ".queue.canvas",
    "current_task": ".queue.control",
    "Retry": ".exceptions",
    "TaskCancelled": ".exceptions",
}


__getattr__ = lazy_exports(__name__, _EXPORTS)


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])


# The lock classes live in ``locking``; ``django_redislock.locks`` is the handler, and
# the old ``django_redislock.locks.<name>`` imports are forwarded with a warning for one release.
alias_module("django_redislock.locks", "django_redislock.locking")

__all__ = [
    "Retry",
    "TaskCancelled",
    "chain",
    "chord",
    "current_task",
    "distributed_lock",
    "group",
    "locks",
    "periodic_task",
    "queues",
    "rate_limited",
    "task",
]
__version__ = "0.1.0"
