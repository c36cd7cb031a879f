"""The old lock classes path, ``django_redislock.locks.<name>``, kept one release.

``django_redislock.locks`` (the attribute) is the lock handler. The lock classes live in
:mod:`django_redislock.locking`; ``from django_redislock.locks import Lock`` still works
through a module object registered under the old name, which warns and forwards.
"""

from __future__ import annotations

import importlib
import sys
import types
import warnings
from typing import Any

OLD = "django_redislock.locks"
NEW = "django_redislock.locking"


def _forward(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(f"module {OLD!r} has no attribute {name!r}")
    warnings.warn(
        f"{OLD}.{name} is deprecated and will be removed in the next release; use {NEW}.{name}",
        DeprecationWarning,
        stacklevel=2,
    )
    package = importlib.import_module(NEW)
    if hasattr(package, name):
        return getattr(package, name)
    try:
        return importlib.import_module(f"{NEW}.{name}")
    except ModuleNotFoundError:
        raise AttributeError(f"module {OLD!r} has no attribute {name!r}") from None


def install() -> None:
    """Register the forwarding module unless something already holds the old name."""
    if OLD in sys.modules:
        return
    module = types.ModuleType(OLD, __doc__)
    module.__getattr__ = _forward  # type: ignore[method-assign]
    sys.modules[OLD] = module
