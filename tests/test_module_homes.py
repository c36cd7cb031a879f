"""Names that moved into smaller modules still import from where they were, as the same object."""

from __future__ import annotations

import importlib

import pytest

MOVED = [
    ("django_redislock.queue.registry", "django_redislock.queue.task_function", "TaskFunction"),
    ("django_redislock.queue.registry", "django_redislock.queue.task_function", "in_transaction"),
    ("django_redislock.queue.registry", "django_redislock.queue.handles", "Enqueued"),
    ("django_redislock.queue.registry", "django_redislock.queue.discovery", "task_modules"),
    ("django_redislock.queue.registry", "django_redislock.queue.discovery", "autodiscover"),
    ("django_redislock.queue.registry", "django_redislock.queue.discovery", "broken_modules"),
    ("django_redislock.queue.registry", "django_redislock.queue.discovery", "check_task_modules"),
    (
        "django_redislock.queue.registry",
        "django_redislock.queue.discovery",
        "TASK_MODULES_SETTING",
    ),
    ("django_redislock.decorators", "django_redislock.decorators.lock", "distributed_lock"),
    ("django_redislock.decorators", "django_redislock.decorators.names", "register_owner"),
    ("django_redislock.decorators", "django_redislock.decorators.names", "BadLockName"),
    ("django_redislock.decorators", "django_redislock.decorators.responses", "locked_response"),
    ("django_redislock", "django_redislock.decorators.lock", "distributed_lock"),
    ("django_redislock", "django_redislock.queue.registry", "task"),
    ("django_redislock.conf", "django_redislock.validation", "MAX_SECONDS"),
    ("django_redislock.locking.keys", "django_redislock.validation", "check_lock_name"),
    ("django_redislock.queue.limits", "django_redislock.validation", "check_limits"),
    ("django_redislock.queue.limits", "django_redislock.conf", "option_limit_errors"),
]


@pytest.mark.parametrize(("old", "new", "name"), MOVED)
def test_a_moved_name_is_the_same_object_at_its_old_path(old: str, new: str, name: str) -> None:
    old_module, new_module = importlib.import_module(old), importlib.import_module(new)
    old_name = "check_name" if name == "check_lock_name" else name
    assert getattr(old_module, old_name) is getattr(new_module, name)


def test_the_task_modules_check_is_still_registered() -> None:
    from django.core.checks import registry

    from django_redislock.queue import discovery

    assert discovery.check_task_modules in registry.registry.get_checks()


def test_the_decorator_logs_under_its_module_name() -> None:
    from django_redislock.decorators import lock

    assert lock.logger.name == "django_redislock.decorators"
