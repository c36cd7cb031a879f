"""Old import paths that forward to a module's new home with a ``DeprecationWarning``.

Kept for one release: ``django_redislock.celery`` and ``django_redislock.tasks`` (modules
whose ``__getattr__`` calls :func:`forward`) and ``django_redislock.locks.<name>``
(:func:`alias_module`: the attribute ``django_redislock.locks`` is the lock handler, so the
old package path can only live in ``sys.modules``).
"""

from __future__ import annotations

import importlib
import sys
import types
import warnings
from typing import Any


def forward(old: str, new: str, name: str) -> Any:
    """``name`` from module ``new`` (an attribute, else a submodule), warning that ``old`` moved.

    Called from a module ``__getattr__``, so the warning points at the importing line.
    """
    if name.startswith("__"):
        raise AttributeError(f"module {old!r} has no attribute {name!r}")
    warnings.warn(
        f"{old}.{name} is deprecated and will be removed in the next release; use {new}.{name}",
        DeprecationWarning,
        stacklevel=3,
    )
    module = importlib.import_module(new)
    if hasattr(module, name):
        return getattr(module, name)
    try:
        return importlib.import_module(f"{new}.{name}")
    except ModuleNotFoundError:
        raise AttributeError(f"module {old!r} has no attribute {name!r}") from None


def alias_module(old: str, new: str) -> None:
    """Register a module under ``old`` whose names forward to ``new``, unless one is there."""
    if old in sys.modules:
        return
    module = types.ModuleType(old, f"Deprecated: moved to {new}.")
    module.__getattr__ = lambda name: forward(old, new, name)  # type: ignore[method-assign]
    sys.modules[old] = module
