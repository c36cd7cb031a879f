"""The queue page's table of concurrency groups: each group's admitted (ready or running)
tasks against its limit, its held tasks and its rate limit (docs/queue.md, "Concurrency
groups"). One read-only script (``queue_groups.lua``, 50 groups at most), sent in the queue
page's pipeline (:func:`~.data.task_page`), so the page stays one round trip: a group name
is text from a task's arguments, escaped by the template."""

from __future__ import annotations

from typing import Any


def group_context(found: Any) -> dict[str, Any]:
    """``groups`` (a list of :class:`~django_redislock.queue.groups.GroupInfo`, fullest
    first) and ``groups_error`` for the queue page, from what its pipeline read (a list, or
    the error that replaced it; None when the page was not read)."""
    if found is None:
        return {"groups": [], "groups_error": ""}
    if isinstance(found, Exception):
        return {"groups": [], "groups_error": str(found)}
    found = sorted(found, key=lambda g: (-g.held, -g.running, g.name))
    return {"groups": found, "groups_error": ""}
