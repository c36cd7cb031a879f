"""The package's public names stay what the docs promise, whatever gets imported first."""

from __future__ import annotations

import importlib
import pkgutil
import re
from pathlib import Path

import pytest

import django_redislock
from django_redislock.handlers import LockHandler, QueueHandler

ROOT = Path(__file__).resolve().parent.parent


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


def pyproject() -> dict:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def test_extras_are_for_users_and_tools_are_dependency_groups() -> None:
    project = pyproject()
    extras = set(project["project"]["optional-dependencies"])
    assert extras == {
        "embedded",
        "fakeredis",
        "hiredis",
        "tasks",
        "celery",
        "prometheus",
        "demo",
        "periodic",
    }
    tools = {re.split(r"[<>=\[]", req)[0] for req in project["dependency-groups"]["test"]}
    assert {"pytest", "ruff", "mypy", "sphinx", "playwright"} <= tools
    assert "bench" in project["dependency-groups"]


def test_one_version_source_and_a_license() -> None:
    project = pyproject()
    assert "version" not in project["project"]
    assert project["project"]["dynamic"] == ["version"]
    assert project["tool"]["hatch"]["version"]["path"] == "django_redislock/__init__.py"
    assert re.fullmatch(r"\d+\.\d+\.\d+", django_redislock.__version__)
    assert project["project"]["license-files"] == ["LICENSE"]
    license_text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert "BSD 3-Clause License" in license_text
    assert "django-redislock developers" in license_text


def test_the_classifiers_name_the_django_this_suite_runs_on() -> None:
    """The compatibility run on Django 6.x installs the newest 6.x: 6.1 once it worked there."""
    import django

    classifiers = pyproject()["project"]["classifiers"]
    major, minor = django.VERSION[:2]
    assert f"Framework :: Django :: {major}.{minor}" in classifiers
    assert "Framework :: Django :: 6.1" in classifiers
