"""The admin's permissions, carried by a model that has no table.

The dashboard shows what lives in Redis, so it needs no rows of its own; but
Django ties admin sections and permissions to models. ``Dashboard`` is
unmanaged (no table is created) and has no default add/change/delete/view
permissions, only the four the dashboard checks, so a project can grant
"look" without "touch" and "touch" without "purge".
"""

from __future__ import annotations

from django.db import models

#: Codenames of the dashboard permissions (``django_redislock.<codename>``).
VIEW = "view_dashboard"
RELEASE_LOCKS = "release_locks"
MANAGE_TASKS = "manage_tasks"
PURGE_QUEUES = "purge_queues"


class Dashboard(models.Model):
    """The "Redis locks & queues" admin section: permissions only, no table."""

    class Meta:
        managed = False
        default_permissions = ()
        permissions = (
            (VIEW, "Can view held locks and queued tasks"),
            (RELEASE_LOCKS, "Can force-release held locks"),
            (MANAGE_TASKS, "Can run, requeue and delete queued tasks"),
            (PURGE_QUEUES, "Can purge whole queues"),
        )
        verbose_name = "dashboard"
        verbose_name_plural = "dashboard"

    def __str__(self) -> str:
        return "Redis locks & queues dashboard"
