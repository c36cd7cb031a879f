"""The Workers page: every live drain_queue worker of every queue alias, refreshing in place.

It reads the workers registry (:mod:`django_redislock.queue.workers`): one
read-only script per queue alias, all aliases at once under the page deadline
(``REDISLOCK_ADMIN_TIMEOUT``). A worker is listed while its last heartbeat is
within ``WORKER_HEARTBEAT_TTL``, so a dead worker disappears by itself; what a
worker shows is at most ``WORKER_HEARTBEAT`` seconds old. Each running task links
to its task page, each queue to its queue page.

Each alias opens with a summary (live, busy, idle, wedged, workers per host)
of every listed worker; the table then shows the workers that match the
filter (``?q=`` text in the host, worker id or a queue name; ``?show=`` busy,
idle or wedged), :data:`WORKERS_PAGE` a page (``?page=``), and at most
:data:`TASKS_SHOWN` running tasks per worker ("and N more"): 200 workers, or 50
async workers of 100 running tasks each, stay a page of a few dozen kilobytes
that the live refresh can resend.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

from django.http import HttpRequest, HttpResponse
from django.utils.http import urlencode

from ..handlers import queues
from ..models import MANAGE_TASKS
from ..queue.workers import WorkerInfo, WorkerList, list_workers
from .common import REDIS_ERRORS, can, duration, parse_int, read_all, render, require, url
from .data import supports_scripts

if TYPE_CHECKING:
    from django.contrib.admin import ModelAdmin


#: Workers per page of an alias's table.
WORKERS_PAGE = 50
#: Running tasks listed per worker (the rest are counted).
TASKS_SHOWN = 5
#: Hosts named in an alias's summary (the busiest first; the rest are counted).
HOSTS_SHOWN = 10
#: What ``?show=`` may ask for.
SHOW = {"busy": "busy", "idle": "idle", "wedged": "wedged"}


@dataclass
class WorkerAlias:
    """One queue alias's section: its workers, or why they cannot be shown."""

    alias: str
    rows: list[dict[str, Any]] = field(default_factory=list)
    total: int = 0
    unreadable: list[str] = field(default_factory=list)
    error: str = ""
    #: live, busy, idle, wedged counts of every listed worker, and (host, workers) pairs
    summary: dict[str, int] = field(default_factory=dict)
    hosts: list[tuple[str, int]] = field(default_factory=list)
    more_hosts: int = 0
    #: workers matching the filter, and the links to the pages around this one
    matching: int = 0
    #: 1-based positions of the first and last rows shown among the matching ones
    first: int = 0
    last: int = 0
    previous_url: str = ""
    next_url: str = ""


def listing(alias: str, limit: int | None = None) -> WorkerList | str:
    """The registry of a queue alias, or why it has none."""
    backend = queues[alias]
    if not supports_scripts(backend):
        return f"{type(backend).__name__} is not a Redis queue backend."
    return list_workers(backend) if limit is None else list_workers(backend, limit)


def read_registries(limit: int | None = None) -> dict[str, Any]:
    """Every queue alias's registry, read in parallel under the page deadline."""
    jobs = {f"admin-workers:{alias}": partial(listing, alias, limit) for alias in queues}
    return read_all(jobs)


def link(name: str, *args: str) -> str:
    """The URL of a dashboard page, or "" when a part is empty (no URL can hold it)."""
    return url(name, *args) if all(args) else ""


def worker_row(alias: str, worker: WorkerInfo, now: int) -> dict[str, Any]:
    """What one table row shows of a worker (durations at the server's ``now``)."""
    return {
        "worker": worker,
        "queues": [(name, link("queue", alias, name)) for name in worker.queues],
        "tasks": [
            {
                "task": task,
                "url": link("task", alias, task.queue, task.id),
                "running_for": duration(task.running_for(now)),
            }
            for task in worker.tasks[:TASKS_SHOWN]
        ],
        "more_tasks": worker.more_tasks + max(0, len(worker.tasks) - TASKS_SHOWN),
        "heartbeat_age": duration(max(0.0, (now - worker.heartbeat) / 1e6)),
        "up_for": duration(max(0.0, (now - worker.started) / 1e6)),
        "actions": {
            command: url("worker_action", alias, worker.id, command)
            for command in (("resume",) if worker.quiet else ("quiet",)) + ("stop",)
        },
    }


def state_of(worker: WorkerInfo) -> str:
    """``wedged``, ``busy`` (running a task) or ``idle``."""
    if not worker.healthy:
        return "wedged"
    return "busy" if worker.tasks or worker.more_tasks else "idle"


def matches(worker: WorkerInfo, text: str, show: str) -> bool:
    """True when ``worker`` passes the page's filter (case-insensitive text, state)."""
    if show and state_of(worker) != show:
        return False
    if not text:
        return True
    needle = text.casefold()
    return any(needle in value.casefold() for value in (worker.host, worker.id, *worker.queues))


@dataclass
class Filter:
    """The page's filter and page number, as read from the request."""

    text: str = ""
    show: str = ""
    page: int = 1

    def link(self, page: int) -> str:
        query = {"q": self.text, "show": self.show, "page": str(page)}
        return url("workers", query=urlencode({k: v for k, v in query.items() if v}))


def section(alias: str, result: Any, chosen: Filter | None = None) -> WorkerAlias:
    chosen = chosen or Filter()
    found = WorkerAlias(alias)
    if isinstance(result, REDIS_ERRORS):
        found.error = str(result)
    elif isinstance(result, Exception):
        raise result
    elif isinstance(result, str):
        found.error = result
    else:
        workers = result.workers
        states = Counter(state_of(w) for w in workers)
        found.summary = {"live": len(workers), **{k: states[k] for k in SHOW}}
        hosts = Counter(w.host for w in workers).most_common()
        found.hosts, found.more_hosts = hosts[:HOSTS_SHOWN], max(0, len(hosts) - HOSTS_SHOWN)
        picked = [w for w in workers if matches(w, chosen.text, chosen.show)]
        found.matching = len(picked)
        pages = max(1, -(-len(picked) // WORKERS_PAGE))
        page = min(chosen.page, pages)
        start = (page - 1) * WORKERS_PAGE
        shown = picked[start : start + WORKERS_PAGE]
        found.first, found.last = start + 1, start + len(shown)
        found.rows = [worker_row(alias, w, result.now) for w in shown]
        found.previous_url = chosen.link(page - 1) if page > 1 else ""
        found.next_url = chosen.link(page + 1) if page < pages else ""
        found.total, found.unreadable = result.total, result.unreadable
    return found


def worker_count(result: Any) -> int | None:
    """Live workers in a registry read for the overview (None: it could not be read)."""
    return result.total if isinstance(result, WorkerList) else None


def workers_page(model_admin: ModelAdmin[Any], request: HttpRequest) -> HttpResponse:
    """Who is working: a summary, then host, pid, pool, queues, running tasks, counts, beats."""
    require(request)
    chosen = Filter(
        text=request.GET.get("q", "").strip()[:200],
        show=SHOW.get(request.GET.get("show", ""), ""),
        page=parse_int(request.GET.get("page"), 1, 10**6) or 1,
    )
    results = read_registries()
    return render(
        model_admin,
        request,
        "workers.html",
        "Workers",
        crumbs=[("Workers", "")],
        live={"worker-aliases": "_workers_rows.html"},
        sections=[section(alias, results[f"admin-workers:{alias}"], chosen) for alias in queues],
        chosen=chosen,
        show_choices=list(SHOW),
        may_manage=can(request, MANAGE_TASKS),
        workers_url=url("workers"),
    )
