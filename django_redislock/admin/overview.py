"""The overview: held-lock count per lock alias and a row per queue of every queue alias.

With one lock alias and one queue alias (the usual setup) the page costs
four round trips: the lock index pipeline, the queue list, the summary
pipeline (which also reads each queue's rates), and the live workers count of
the workers registry. Every alias is read in its own thread under the page
deadline (``REDISLOCK_ADMIN_TIMEOUT``),
so a hung Redis costs the page that deadline once. An alias whose Redis is
down shows its error in its own section, a queue that cannot be read shows
its error in its own row; the rest renders. Queues are listed most troubled
first (``?sort=name`` for name order).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.utils.http import urlencode

from ..handlers import locks, queues
from ..models import MANAGE_TASKS, PURGE_QUEUES, RELEASE_LOCKS
from .common import LIVE_SECONDS, REDIS_ERRORS, can, duration, read_all, render, require, url
from .data import supports_scripts
from .search import find_everywhere
from .summaries import QueueSummary, queue_summaries
from .workers import listing, worker_count

if TYPE_CHECKING:
    from django.contrib.admin import ModelAdmin

#: Seconds between refreshes of the overview's tables.
REFRESH_SECONDS = LIVE_SECONDS


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
    workers: int | None = None  # live workers in the registry (None: unknown)


def count_locks(alias: str) -> int | str:
    """Held locks of a lock alias, or why they cannot be counted."""
    backend = locks[alias]
    if not backend.supports_listing:
        return f"{type(backend).__name__} cannot list its locks."
    count: int = backend.held_lock_count()
    return count


def summarize_queues(alias: str) -> list[QueueSummary] | str:
    """Summaries of a queue alias's queues, or why there are none."""
    backend = queues[alias]
    if not supports_scripts(backend):
        return f"{type(backend).__name__} is not a Redis queue backend."
    return queue_summaries(backend, trends=True)


def read_aliases(find: str = "") -> dict[str, Any]:
    """Every alias read in parallel under the page deadline; a value or an exception each.

    With ``find``, every queue of every queue alias is also searched for that task id.
    """
    jobs: dict[str, Callable[[], Any]] = {}
    if find:
        for alias in queues:
            backend = queues[alias]
            if supports_scripts(backend):
                jobs[f"admin-find:{alias}"] = partial(find_everywhere, backend, find)
    for alias in locks:
        jobs[f"admin-locks:{alias}"] = partial(count_locks, alias)
    for alias in queues:
        jobs[f"admin-queues:{alias}"] = partial(summarize_queues, alias)
        jobs[f"admin-workers:{alias}"] = partial(listing, alias, 0)  # the count only
    return read_all(jobs)


def lock_aliases(results: dict[str, Any]) -> list[LockAlias]:
    """Held-lock counts per lock alias (one pipeline each)."""
    rows = []
    for alias in locks:
        row = LockAlias(alias, url=url("locks", query=urlencode({"alias": alias})))
        result = results[f"admin-locks:{alias}"]
        if isinstance(result, REDIS_ERRORS):
            row.error = str(result)
        elif isinstance(result, Exception):
            raise result
        elif isinstance(result, str):
            row.error = result
        else:
            row.count = result
        rows.append(row)
    return rows


def queue_row(alias: str, summary: QueueSummary) -> dict[str, Any]:
    lease = summary.next_lease_in
    return {
        "summary": summary,
        "url": url("queue", alias, summary.name),
        "oldest_due": duration(summary.oldest_due_age),
        "next_lease": duration(lease) if lease is None or lease >= 0 else "",
        "lease_overdue": duration(-lease) if lease is not None and lease < 0 else "",
    }


def queue_aliases(results: dict[str, Any], by_trouble: bool) -> list[QueueAlias]:
    """A summary row per queue per queue alias (two round trips each)."""
    sections = []
    for alias in queues:
        section = QueueAlias(alias, workers=worker_count(results[f"admin-workers:{alias}"]))
        result = results[f"admin-queues:{alias}"]
        if isinstance(result, REDIS_ERRORS):
            section.error = str(result)
        elif isinstance(result, Exception):
            raise result
        elif isinstance(result, str):
            section.error = result
        else:
            rows = sorted(result, key=lambda s: s.trouble) if by_trouble else result
            section.queues = [queue_row(alias, s) for s in rows]
        sections.append(section)
    return sections


def found_rows(results: dict[str, Any], find: str) -> list[dict[str, Any]]:
    """The search hits of every queue alias, with links (an alias that failed says so)."""
    rows: list[dict[str, Any]] = []
    if not find:
        return rows
    for alias in queues:
        result = results.get(f"admin-find:{alias}")
        if isinstance(result, REDIS_ERRORS):
            rows.append({"alias": alias, "error": str(result)})
        elif isinstance(result, list):
            for name, task in result:
                rows.append(
                    {
                        "alias": alias,
                        "queue": name,
                        "task": task,
                        "url": url("task", alias, name, find),
                    }
                )
    return rows


def overview(model_admin: ModelAdmin[Any], request: HttpRequest) -> HttpResponse:
    """The dashboard's front page; its tables refresh in place unless turned off."""
    require(request)
    refresh = request.GET.get("refresh") != "off"
    by_trouble = request.GET.get("sort") != "name"
    find = request.GET.get("find", "").strip()
    results = read_aliases(find)
    return render(
        model_admin,
        request,
        "overview.html",
        "Redis locks & queues",
        live=(
            {
                "lock-aliases": "_overview_locks.html",
                "queue-aliases": "_overview_queues.html",
            }
            if refresh
            else None
        ),
        lock_aliases=lock_aliases(results),
        queue_aliases=queue_aliases(results, by_trouble),
        by_trouble=by_trouble,
        audit_url=url("audit"),
        workers_url=url("workers"),
        sales_url=url("sales") if getattr(settings, "REDISLOCK_ADMIN_STOCKS", None) else "",
        find=find,
        found=found_rows(results, find),
        refresh=refresh,
        refresh_seconds=REFRESH_SECONDS,
        may_release=can(request, RELEASE_LOCKS),
        may_manage=can(request, MANAGE_TASKS),
        may_purge=can(request, PURGE_QUEUES),
    )
