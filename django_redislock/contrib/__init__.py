"""Integrations with other frameworks (Celery, Django's tasks framework).

The core never imports this package: :func:`register` hooks each integration
into the core's registries (a payload runner for the worker, a named lock
owner for :func:`~django_redislock.decorators.distributed_lock`). The app's
``AppConfig.ready`` calls it; the integrations' own modules (which may need an
optional dependency) are imported only when a payload or a lock needs them.
"""

from __future__ import annotations

from typing import Any

from ..decorators.names import register_owner
from ..queue.records import Task
from ..queue.runners import register_payload_runner


def _run_django_task(task: Task) -> Any:
    from .tasks.runner import django_task_function

    return django_task_function(task)


def _celery_task_id() -> str | None:
    from .celery import current_task_id

    return current_task_id()


def register() -> None:
    """Register every integration's hooks with the core; safe to call again."""
    register_payload_runner("django_task", _run_django_task)
    register_owner("celery", _celery_task_id)
