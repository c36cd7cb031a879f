"""The reliable task queue: :class:`Queue`, :class:`Task`, the ``@task`` registry and the worker."""

from __future__ import annotations

from .calls import Claim, Entry
from .queue import Queue
from .records import DEAD, DELAYED, IN_FLIGHT, READY, STATES, Task

__all__ = ["DEAD", "DELAYED", "IN_FLIGHT", "READY", "STATES", "Claim", "Entry", "Queue", "Task"]
