"""The worker's side of ``@task(rate_limit=...)``: ask Redis before each run of such a task.

The claim script cannot see which function a task calls (payloads are opaque
bytes, decoded per task in the worker), so a task's own limit is checked after
the claim: one ``queue_throttle`` call per run of a rate-limited task either
counts the run against the limit (GCRA on server time, state in the queue's
flow hash under the task's path) or gives the task back to the queue, due when
the limit admits it, with its claim ended and no attempt counted. Tasks given
back one after another are spread one interval apart, so they come due in turn
rather than all at once. A task the limit admits within half an interval (25 ms
at most) is not given back: :meth:`~.flow.FlowMixin.throttle` waits for it here,
so a worker that wakes for a slot a few ms early does not lose the slot. Tasks
without a limit cost nothing extra.
"""

from __future__ import annotations

import logging
from typing import Any

from ..validation import Rate
from .flow import DEFERRED, LOST
from .payloads import task_path
from .queue import Queue
from .records import Task

logger = logging.getLogger("django_redislock.worker")


def admit(queue: Queue, task: Task, fn: Any) -> bool:
    """True when ``task`` may run now; False when it went back to the queue or was lost."""
    rate: Rate | None = getattr(fn, "rate_limit", None)
    if rate is None:
        return True
    name = getattr(fn, "path", None) or task_path(task)
    outcome = queue.throttle(task, name, rate)
    if outcome == DEFERRED:
        logger.debug("task %s of %r waits for its rate limit %s", task.id, queue.name, rate.text)
    elif outcome == LOST:
        logger.warning("task %s of %r: its claim was lost before it ran", task.id, queue.name)
    return outcome not in (DEFERRED, LOST)
