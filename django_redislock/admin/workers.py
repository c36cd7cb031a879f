"""The Workers page: every live drain_queue worker of every queue alias, refreshing in place.

It reads the workers registry (:mod:`django_redislock.queue.workers`): one
read-only script per queue alias, all aliases at once under the page deadline
(``REDISLOCK_ADMIN_TIMEOUT``). A worker is listed while its last heartbeat is
within ``WORKER_HEARTBEAT_TTL``, so a dead worker disappears by itself; what a
worker shows is at most ``WORKER_HEARTBEAT`` seconds old. Each running task links
to its task page, each queue to its queue page.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

from django.http import HttpRequest, HttpResponse

from ..handlers import queues
from ..queue.workers import WorkerInfo, WorkerList, list_workers
from .common import REDIS_ERRORS, duration, read_all, render, require, url
from .data import supports_scripts

if TYPE_CHECKING:
    from django.contrib.admin import ModelAdmin


@dataclass
class WorkerAlias:
    """One queue alias's section: its workers, or why they cannot be shown."""

    alias: str
    rows: list[dict[str, Any]] = field(default_factory=list)
    total: int = 0
    unreadable: list[str] = field(default_factory=list)
    error: str = ""


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
            for task in worker.tasks
        ],
        "heartbeat_age": duration(max(0.0, (now - worker.heartbeat) / 1e6)),
        "up_for": duration(max(0.0, (now - worker.started) / 1e6)),
    }


def section(alias: str, result: Any) -> WorkerAlias:
    found = WorkerAlias(alias)
    if isinstance(result, REDIS_ERRORS):
        found.error = str(result)
    elif isinstance(result, Exception):
        raise result
    elif isinstance(result, str):
        found.error = result
    else:
        found.rows = [worker_row(alias, w, result.now) for w in result.workers]
        found.total, found.unreadable = result.total, result.unreadable
    return found


def worker_count(result: Any) -> int | None:
    """Live workers in a registry read for the overview (None: it could not be read)."""
    return result.total if isinstance(result, WorkerList) else None


def workers_page(model_admin: ModelAdmin[Any], request: HttpRequest) -> HttpResponse:
    """Who is working: host, pid, pool, queues, running tasks, counts, last heartbeat."""
    require(request)
    results = read_registries()
    return render(
        model_admin,
        request,
        "workers.html",
        "Workers",
        crumbs=[("Workers", "")],
        live={"worker-aliases": "_workers_rows.html"},
        sections=[section(alias, results[f"admin-workers:{alias}"]) for alias in queues],
    )
