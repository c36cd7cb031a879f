"""The task modules a worker imports, and only these: finding, importing, checking them.

A worker imports only the task modules (:func:`task_modules`: the ``tasks``
module of every installed app and the modules of ``REDISLOCK_TASK_MODULES``),
never a module named by a payload; :func:`~.registry.resolve` looks a payload's
path up among what these imports registered.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Iterable
from typing import Any

from django.core.checks import CheckMessage, Error, register
from django.core.exceptions import ImproperlyConfigured

from ..exceptions import TaskImportError

#: The setting that lists task modules besides the ``tasks`` module of every installed app.
TASK_MODULES_SETTING = "REDISLOCK_TASK_MODULES"
#: Modules of :func:`task_modules` whose last import raised: module -> the error.
broken_modules: dict[str, str] = {}


def task_modules() -> list[str]:
    """The modules a worker may import to find tasks, and only these.

    ``<app>.tasks`` for every installed app that has a ``tasks`` submodule (the
    file is found without importing it), then the dotted module names of the
    ``REDISLOCK_TASK_MODULES`` setting. A payload's path is only ever looked up
    among what these imports registered, never imported itself.
    """
    from django.apps import apps
    from django.conf import settings
    from django.utils.module_loading import module_has_submodule

    found = [
        f"{config.name}.tasks"
        for config in apps.get_app_configs()
        if module_has_submodule(config.module, "tasks")
    ]
    extra = getattr(settings, TASK_MODULES_SETTING, ())
    problem = task_modules_error(extra)
    if problem:
        raise ImproperlyConfigured(problem)
    return found + [name for name in extra if name not in found]


def task_modules_error(value: Any) -> str | None:
    """What is wrong with a ``REDISLOCK_TASK_MODULES`` value (its shape), or None."""
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        return f"{TASK_MODULES_SETTING} must be a list of dotted module names, got {value!r}"
    for i, name in enumerate(value):
        parts = name.split(".") if isinstance(name, str) else [""]
        if not all(part.isidentifier() for part in parts):
            return f"{TASK_MODULES_SETTING}[{i}] must be a dotted module name, got {name!r}"
    return None


def import_task_module(module: str) -> None:
    """Import one of :func:`task_modules`; raises ``TaskImportError`` (and remembers it)."""
    try:
        importlib.import_module(module)
    except Exception as exc:
        broken_modules[module] = f"{type(exc).__name__}: {exc}"
        raise TaskImportError(f"importing task module {module!r} failed: {exc!r}") from exc
    broken_modules.pop(module, None)


def autodiscover() -> dict[str, str]:
    """Import every task module; returns the ones that raised (module -> error), never raises.

    A module that fails is left for :func:`resolve` to try again when a task
    needs it, so one broken module stops only its own tasks (they are retried
    with backoff), not the worker.
    """
    broken = {}
    for module in task_modules():
        try:
            import_task_module(module)
        except TaskImportError:
            broken[module] = broken_modules[module]
    return broken


def owner_module(path: str, modules: Iterable[str]) -> str | None:
    """The task module that ``path`` lies in (the longest one that is a prefix), or None."""
    owners = [module for module in modules if path.startswith(module + ".")]
    return max(owners, key=len) if owners else None


@register("redislock")
def check_task_modules(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """``redislock.E020``: ``REDISLOCK_TASK_MODULES`` is not a list of modules that exist.

    The modules are located, not imported (importing runs their code; a module
    that raises is the worker's business: its tasks are retried).
    """
    from django.conf import settings

    value = getattr(settings, TASK_MODULES_SETTING, None)
    if value is None:
        return []
    hint = f"{TASK_MODULES_SETTING} = ['myproject.jobs']: modules whose @task functions run"
    problem = task_modules_error(value)
    if problem:
        return [Error(problem, hint=hint, id="redislock.E020")]
    errors: list[CheckMessage] = []
    for i, name in enumerate(value):
        try:
            spec = importlib.util.find_spec(name)
        except Exception as exc:  # a parent package that fails to import or is not a package
            spec, why = None, f": {exc!r}"
        else:
            why = ""
        if spec is None:
            errors.append(
                Error(
                    f"{TASK_MODULES_SETTING}[{i}]: no module named {name!r}{why}",
                    hint=hint,
                    id="redislock.E020",
                )
            )
    return errors
