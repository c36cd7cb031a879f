"""The package's public names stay what the docs promise, whatever gets imported first."""

from __future__ import annotations

import importlib
import pkgutil

import django_redislock
from django_redislock.handlers import LockHandler, QueueHandler


def test_handlers_are_not_shadowed_by_subpackages() -> None:
    # Importing a subpackage binds its name on the parent package: a subpackage called
    # ``locks`` or ``queues`` would replace the handler once anything imported it.
    for module in pkgutil.walk_packages(django_redislock.__path__, "django_redislock."):
        if ".management." not in module.name and not module.name.endswith(".celery"):
            importlib.import_module(module.name)
    assert isinstance(django_redislock.locks, LockHandler)
    assert isinstance(django_redislock.queues, QueueHandler)
    assert callable(django_redislock.distributed_lock)
    assert callable(django_redislock.task)
