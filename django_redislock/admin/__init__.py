"""The "Redis locks & queues" admin section: a dashboard with no tables of its own.

``Dashboard`` is an unmanaged model that only carries permissions (see
:mod:`django_redislock.models`). Its ``ModelAdmin`` replaces every standard
admin URL: the changelist is the overview, and ``get_urls`` adds the locks,
queue, task and action pages, each wrapped in ``admin_site.admin_view`` (staff
only, CSRF protected, never cached). So the pages live under
``/admin/django_redislock/dashboard/`` with no ``urls.py`` edit, and the
standard add/change/delete views, which would query the missing table, are
never reachable.

Permissions (``django_redislock.<codename>``):

* ``view_dashboard``: every page;
* ``release_locks``: force-release a held lock;
* ``manage_tasks``: run now, requeue, cancel and delete tasks, cancel workflows, requeue all
  dead tasks, return expired leases to ready, pause and resume queues, quiet, resume and stop
  workers;
* ``purge_queues``: delete every task of a queue.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.urls import URLPattern, path

from ..models import VIEW, Dashboard

# The pages' modules (and what they import: the lock, stock and metrics readers) load with the
# first page asked for, not with the admin's autodiscovery in django.setup(): a worker process
# (drain_queue) sets Django up with the admin installed but never serves a page.

if TYPE_CHECKING:
    ModelAdminBase = admin.ModelAdmin[Dashboard]
else:  # ModelAdmin is generic for the type checker only
    ModelAdminBase = admin.ModelAdmin


@admin.register(Dashboard)
class DashboardAdmin(ModelAdminBase):
    """Routes the dashboard pages; the pages themselves live in this package's modules."""

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        from .common import can

        return can(request, VIEW)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        """The overview (the section's entry in the admin index links here)."""
        from . import overview

        return overview.overview(self, request)

    def get_urls(self) -> list[URLPattern]:
        from . import (
            actions,
            audit,
            coordination,
            flow,
            locks,
            overview,
            queue_actions,
            queues,
            runs,
            sales,
            semaphores,
            worker_actions,
            workers,
            workflows,
        )

        def page(view: Callable[..., HttpResponse], name: str, route: str, **kw: Any) -> URLPattern:
            wrapped = self.admin_site.admin_view(partial(styled_403, view, self, **kw))
            return path(route, wrapped, name=f"django_redislock_dashboard_{name}")

        one = "queues/<str:alias>/<str:name>/"
        task = one + "tasks/<str:task_id>/"
        return [
            page(overview.overview, "changelist", ""),
            page(audit.audit_page, "audit", "audit/"),
            page(sales.sales_page, "sales", "flash-sales/"),
            page(workers.workers_page, "workers", "workers/"),
            page(
                worker_actions.worker_action,
                "worker_action",
                "workers/<str:alias>/<str:worker_id>/<str:command>/",
            ),
            page(locks.locks_page, "locks", "locks/"),
            page(semaphores.semaphore_page, "semaphore", "locks/semaphore/"),
            page(coordination.coordination_page, "coordination", "locks/coordination/"),
            page(
                coordination.coordination_release,
                "coord_release",
                "locks/coordination/<str:alias>/<str:kind>/<str:name>/release/",
            ),
            page(locks.release, "release", "locks/<str:alias>/<str:name>/release/"),
            page(queues.queue_page, "queue", "queues/<str:alias>/<str:name>/"),
            page(actions.bulk, "bulk", "queues/<str:alias>/<str:name>/actions/"),
            page(
                queue_actions.queue_action,
                "requeue_dead",
                "queues/<str:alias>/<str:name>/requeue-dead/",
                purge=False,
            ),
            page(
                queue_actions.return_expired,
                "return_expired",
                "queues/<str:alias>/<str:name>/return-expired/",
            ),
            page(queue_actions.queue_action, "purge", one + "purge/", purge=True),
            page(flow.flow_action, "flow", "queues/<str:alias>/<str:name>/flow/<str:action>/"),
            page(runs.runs_page, "runs", one + "runs/"),
            page(workflows.workflow_page, "workflow", one + "workflows/<str:workflow_id>/"),
            page(
                workflows.workflow_cancel,
                "workflow_cancel",
                one + "workflows/<str:workflow_id>/cancel/",
            ),
            page(queues.task_detail, "task", task),
            page(queues.task_payload, "payload", task + "payload/"),
            page(actions.task_action, "task_action", task + "<str:action>/"),
            # last: where the admin links a LogEntry ("Recent actions") to its object
            page(audit.open_object, "change", "<path:object_id>/change/"),
        ]


def styled_403(
    view: Callable[..., HttpResponse], model_admin: DashboardAdmin, request: HttpRequest, **kw: Any
) -> HttpResponse:
    """``view`` within one Redis budget, a missing permission answered in the admin's layout."""
    from .common import can, render, request_deadline

    try:
        with request_deadline():
            return view(model_admin, request, **kw)
    except PermissionDenied:
        if not can(request, VIEW):
            raise  # not a dashboard user at all: the site's own 403
        response = render(model_admin, request, "denied.html", "Permission denied")
        response.status_code = 403
        return response
