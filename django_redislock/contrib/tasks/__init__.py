"""A backend for Django's tasks framework on this app's queue.

::

    TASKS = {
        "default": {
            "BACKEND": "django_redislock.contrib.tasks.RedisTaskBackend",
            "QUEUES": ["default", "emails"],
            "OPTIONS": {"USING": "default", "RESULT_TTL": 86400},
        }
    }

``RedisTaskBackend`` is imported lazily (module ``__getattr__``): this package is
also found by ``drain_queue``'s autodiscovery of ``tasks`` modules and must
import on a Django without ``django.tasks`` or the ``django-tasks`` backport.
"""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    if name == "RedisTaskBackend":
        from .backend import RedisTaskBackend

        return RedisTaskBackend
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["RedisTaskBackend"]
