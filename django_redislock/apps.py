"""App configuration: registers checks and receivers, never connects to Redis."""

from __future__ import annotations

from django.apps import AppConfig


class RedisLockConfig(AppConfig):
    name = "django_redislock"
    verbose_name = "Redis locks & queues"
    default_auto_field = "django.db.models.AutoField"

    def ready(self) -> None:
        from . import checks, signals  # noqa: F401  (registration only)
        from .contrib import register

        register()
