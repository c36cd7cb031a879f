"""Django's tasks framework: ``django.tasks`` (Django 6+) or the ``django-tasks`` backport.

Imported only when the backend is used, so that ``django_redislock.contrib.tasks``
(found by ``drain_queue``'s autodiscovery of ``tasks`` modules) imports on any
Django. The native framework wins when both are installed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...exceptions import MissingDependency

MISSING = (
    "django_redislock.contrib.tasks.RedisTaskBackend needs Django's tasks framework: Django 6.0+ "
    "ships it as django.tasks; on Django 4.2/5.x install the backport with "
    "pip install 'django-redislock[tasks]' (the django-tasks package)."
)

if TYPE_CHECKING:
    from django_tasks import task_backends
    from django_tasks.backends.base import BaseTaskBackend
    from django_tasks.base import (
        DEFAULT_TASK_PRIORITY,
        Task,
        TaskContext,
        TaskError,
        TaskResult,
        TaskResultStatus,
    )
    from django_tasks.exceptions import InvalidTaskError as InvalidTask
    from django_tasks.exceptions import TaskResultDoesNotExist
    from django_tasks.signals import task_enqueued, task_finished, task_started
    from django_tasks.utils import normalize_json

    NATIVE = False
else:
    try:
        from django.tasks import task_backends
        from django.tasks.backends.base import BaseTaskBackend
        from django.tasks.base import (
            DEFAULT_TASK_PRIORITY,
            Task,
            TaskContext,
            TaskError,
            TaskResult,
            TaskResultStatus,
        )
        from django.tasks.exceptions import InvalidTask, TaskResultDoesNotExist
        from django.tasks.signals import task_enqueued, task_finished, task_started
        from django.utils.json import normalize_json

        NATIVE = True
    except ImportError:
        try:
            from django_tasks import task_backends
            from django_tasks.backends.base import BaseTaskBackend
            from django_tasks.base import (
                DEFAULT_TASK_PRIORITY,
                Task,
                TaskContext,
                TaskError,
                TaskResult,
                TaskResultStatus,
            )
            from django_tasks.exceptions import InvalidTaskError as InvalidTask
            from django_tasks.exceptions import TaskResultDoesNotExist
            from django_tasks.signals import task_enqueued, task_finished, task_started
            from django_tasks.utils import normalize_json
        except ImportError as exc:
            raise MissingDependency(MISSING) from exc

        NATIVE = False

__all__ = [
    "DEFAULT_TASK_PRIORITY",
    "NATIVE",
    "BaseTaskBackend",
    "InvalidTask",
    "Task",
    "TaskContext",
    "TaskError",
    "TaskResult",
    "TaskResultDoesNotExist",
    "TaskResultStatus",
    "normalize_json",
    "task_backends",
    "task_enqueued",
    "task_finished",
    "task_started",
]
