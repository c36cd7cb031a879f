from __future__ import annotations

from typing import Any

from django.apps import AppConfig
from django.db.backends.signals import connection_created


def tune_sqlite(sender: Any, connection: Any, **kwargs: Any) -> None:
    """WAL for SQLite: the order worker writes while the site reads, without a commit fsync."""
    if connection.vendor == "sqlite":
        with connection.cursor() as cursor:
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=NORMAL")


class ShopConfig(AppConfig):
    name = "shop"
    verbose_name = "Flash-sale shop"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        connection_created.connect(tune_sqlite, dispatch_uid="shop.tune_sqlite")
