"""The overview: held-lock count per lock alias and a row per queue of every queue alias.

With one lock alias and one queue alias (the usual setup) the page costs
three round trips: the lock index pipeline, the queue list, the summary
pipeline. An alias whose Redis is down shows its error in its own section;
the others still render.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from django.http import HttpRequest
from django.template.response import TemplateResponse
from django.utils.http import urlencode

from ..handlers import locks, queues
from ..models import MANAGE_TASKS, PURGE_QUEUES, RELEASE_LOCKS
from .common import REDIS_ERRORS, can, duration, render, require, url
from .data import QueueSummary, queue_summaries, supports_scripts

if TYPE_CHECKING:
    from django.contrib.admin import ModelAdmin

#: Seconds between automatic reloads of the overview.
REFRESH_SECONDS = 10


@dataclass
class LockAlias:
    alias: str
    count: int | None = None
    error: str = ""
    url: str = ""


@dataclass
class QueueAlias:
    alias: str
    queues: list[dict[str, Any]] = field(default_factory=list)
    error: str = ""


def lock_aliases() -> list[LockAlias]:
    """Held-lock counts per lock alias (one pipeline each)."""
    rows = []
    for alias in locks:
        row = LockAlias(alias, url=url("locks", query=urlencode({"alias": alias})))
        try:
            backend = locks[alias]
            if not backend.supports_listing:
                row.error = f"{type(backend).__name__} cannot list its locks."
            else:
                row.count = backend.held_lock_count()
        except REDIS_ERRORS as exc:
            row.error = str(exc)
        rows.append(row)
    return rows


def queue_row(alias: str, summary: QueueSummary) -> dict[str, Any]:
    return {
        "summary": summary,
        "url": url("queue", alias, summary.name),
        "oldest_due": duration(summary.oldest_due_age),
        "next_lease": duration(summary.next_lease_in),
    }


def queue_aliases() -> list[QueueAlias]:
    """A summary row per queue per queue alias (two round trips each)."""
    sections = []
    for alias in queues:
        section = QueueAlias(alias)
        try:
            backend = queues[alias]
            if not supports_scripts(backend):
                section.error = f"{type(backend).__name__} is not a Redis queue backend."
            else:
                section.queues = [queue_row(alias, s) for s in queue_summaries(backend)]
        except REDIS_ERRORS as exc:
            section.error = str(exc)
        sections.append(section)
    return sections


def overview(model_admin: ModelAdmin[Any], request: HttpRequest) -> TemplateResponse:
    """The dashboard's front page; reloads itself every few seconds unless turned off."""
    require(request)
    refresh = request.GET.get("refresh") != "off"
    return render(
        model_admin,
        request,
        "overview.html",
        "Redis locks & queues",
        lock_aliases=lock_aliases(),
        queue_aliases=queue_aliases(),
        refresh=refresh,
        refresh_seconds=REFRESH_SECONDS,
        may_release=can(request, RELEASE_LOCKS),
        may_manage=can(request, MANAGE_TASKS),
        may_purge=can(request, PURGE_QUEUES),
    )
