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
* ``manage_tasks``: run now, requeue and delete tasks, requeue all dead tasks;
* ``purge_queues``: delete every task of a queue.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.urls import URLPattern, path

from ..models import VIEW, Dashboard
from . import actions, locks, overview, queues
from .common import can

if TYPE_CHECKING:
    ModelAdminBase = admin.ModelAdmin[Dashboard]
else:  # ModelAdmin is generic for the type checker only
    ModelAdminBase = admin.ModelAdmin


@admin.register(Dashboard)
class DashboardAdmin(ModelAdminBase):
    """Routes the dashboard pages; the pages themselves live in this package's modules."""

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
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
        return overview.overview(self, request)

    def get_urls(self) -> list[URLPattern]:
        def page(view: Callable[..., HttpResponse], name: str, route: str, **kw: Any) -> URLPattern:
            wrapped = self.admin_site.admin_view(partial(view, self, **kw))
            return path(route, wrapped, name=f"django_redislock_dashboard_{name}")

        task = "queues/<str:alias>/<str:name>/tasks/<str:task_id>/"
        return [
            page(overview.overview, "changelist", ""),
            page(locks.locks_page, "locks", "locks/"),
            page(locks.release, "release", "locks/<str:alias>/<str:name>/release/"),
            page(queues.queue_page, "queue", "queues/<str:alias>/<str:name>/"),
            page(actions.bulk, "bulk", "queues/<str:alias>/<str:name>/actions/"),
            page(
                actions.queue_action,
                "requeue_dead",
                "queues/<str:alias>/<str:name>/requeue-dead/",
                purge=False,
            ),
            page(actions.queue_action, "purge", "queues/<str:alias>/<str:name>/purge/", purge=True),
            page(queues.task_detail, "task", task),
            page(actions.task_action, "task_action", task + "<str:action>/"),
        ]
