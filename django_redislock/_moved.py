"""Old import paths that forward to a module's new home with a ``DeprecationWarning``."""

from __future__ import annotations

import importlib
import warnings
from typing import Any


def forward(old: str, new: str, name: str) -> Any:
    """``name`` from module ``new``, warning that ``old`` is deprecated."""
    if name.startswith("__"):
        raise AttributeError(f"module {old!r} has no attribute {name!r}")
    warnings.warn(
        f"{old} is deprecated and will be removed in the next release; use {new}",
        DeprecationWarning,
        stacklevel=3,
    )
    try:
        return getattr(importlib.import_module(new), name)
    except AttributeError:
        raise AttributeError(f"module {old!r} has no attribute {name!r}") from None
