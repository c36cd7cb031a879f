"""The queue page's table of concurrency groups: each group's admitted (ready or running)
tasks against its limit, its held tasks and its rate limit (docs/queue.md, "Concurrency
groups"). One read-only script (``queue_groups.lua``), 50 groups at most: a group name is
text from a task's arguments, escaped by the template."""

from __future__ import annotations

from typing import Any

from .common import REDIS_ERRORS

#: Groups shown on a queue page at most.
GROUPS_SHOWN = 50


def group_context(queue: Any) -> dict[str, Any]:
    """``groups`` (a list of :class:`~django_redislock.queue.groups.GroupInfo`, fullest
    first) and ``groups_error`` for the queue page."""
    try:
        found = queue.groups(GROUPS_SHOWN)
    except REDIS_ERRORS as exc:
        return {"groups": [], "groups_error": str(exc)}
    found.sort(key=lambda g: (-g.held, -g.running, g.name))
    return {"groups": found, "groups_error": ""}
