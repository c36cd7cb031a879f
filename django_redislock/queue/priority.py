"""Priority levels of queued tasks: checking them, sending them, and Django's scale.

A task has a level from 0 to 9; due tasks of a higher level are claimed first,
tasks of one level in due order (FIFO), and a delayed task waits for its time
whatever its level. 0 is the default and the lowest level, so a queue that never
uses priorities keeps its plain due-order claim (see docs/queue.md, "Priorities",
and ``scripts/fragments/priority.lua`` for the keys).
"""

from __future__ import annotations

import math
from typing import Any

from ..exceptions import InvalidArgument

#: The default level, also the lowest one.
DEFAULT_PRIORITY = 0
#: The highest level.
MAX_PRIORITY = 9
#: The two keys of a queue's priorities, after its claims hash in the queue scripts' KEYS:
#: the index of pending prioritized tasks (by level, then due time) and id -> level.
PRIORITY_PARTS = ("prio", "priority")
#: Django's tasks framework's range of priorities (``django.tasks``: -100 to 100, default 0).
DJANGO_MIN, DJANGO_MAX = -100, 100


def check_priority(value: Any, argument: str = "priority") -> int:
    """``value`` if it is a level (an int from 0 to 9), else ``InvalidArgument`` naming it."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgument(
            f"{argument} must be an int from {DEFAULT_PRIORITY} to {MAX_PRIORITY}, "
            f"got {type(value).__name__} {value!r}"
        )
    if not DEFAULT_PRIORITY <= value <= MAX_PRIORITY:
        raise InvalidArgument(
            f"{argument} must be from {DEFAULT_PRIORITY} (the default, lowest) to "
            f"{MAX_PRIORITY} (highest), got {value}"
        )
    return value


def enqueue_flag(replace: bool, priority: int = DEFAULT_PRIORITY) -> str:
    """ARGV[1] of the enqueue script: the replace flag, then the level unless it is 0.

    The default level sends exactly what was sent before priorities existed.
    """
    flag = "1" if replace else "0"
    return flag if priority == DEFAULT_PRIORITY else f"{flag}{priority}"


def from_django(priority: int) -> int:
    """The level of a Django task priority (-100..100, default 0, higher runs first).

    0 and below map to the default level 0 (the lowest: a queue has no level below
    its default), 1..100 spread over 1..9 (``ceil(p * 9 / 100)``: 1-11 -> 1, 12-22
    -> 2, ..., 89-100 -> 9).
    """
    if priority <= 0:
        return DEFAULT_PRIORITY
    return min(MAX_PRIORITY, math.ceil(priority * MAX_PRIORITY / DJANGO_MAX))
