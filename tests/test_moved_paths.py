"""Old import paths of the integrations still work, with a DeprecationWarning."""

from __future__ import annotations

import importlib

import pytest

from django_redislock.contrib import celery as contrib_celery
from django_redislock.contrib.tasks import backend as contrib_backend


@pytest.mark.parametrize(
    ("old", "new", "name"),
    [
        ("django_redislock.celery", contrib_celery, "singleton"),
        ("django_redislock.celery", contrib_celery, "release_task_lock"),
        ("django_redislock.tasks.backend", contrib_backend, "RedisTaskBackend"),
        ("django_redislock.tasks", contrib_backend, "RedisTaskBackend"),
    ],
)
def test_old_path_warns_and_forwards_the_same_object(old: str, new: object, name: str) -> None:
    module = importlib.import_module(old)
    with pytest.warns(DeprecationWarning, match=old):
        value = getattr(module, name)
    assert value is getattr(new, name)


def test_old_path_names_the_missing_attribute() -> None:
    module = importlib.import_module("django_redislock.celery")
    with pytest.warns(DeprecationWarning), pytest.raises(AttributeError, match="nope"):
        module.nope  # noqa: B018


def test_tasks_setting_with_the_old_backend_path_still_imports() -> None:
    from django.utils.module_loading import import_string

    with pytest.warns(DeprecationWarning):
        cls = import_string("django_redislock.tasks.backend.RedisTaskBackend")
    assert cls is contrib_backend.RedisTaskBackend


def test_the_worker_finds_the_django_tasks_runner_without_importing_contrib() -> None:
    from django_redislock.queue.runners import payload_runner

    assert payload_runner({"django_task": "app.tasks.x"}) is not None
    assert payload_runner({"task": "app.tasks.x"}) is None
