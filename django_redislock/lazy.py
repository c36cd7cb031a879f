"""Exported names a package imports on first use (PEP 562 module ``__getattr__``).

A worker process imports the package for its queue code; the lock classes, the decorator
and its HTTP responses would cost it start-up time it never uses, so the packages that
export them import each name's submodule when the name is first asked for.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(package: str, exports: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package``: ``exports`` maps a name to the (relative)
    module defining it; the value is kept in the package once imported."""

    def __getattr__(name: str) -> Any:
        where = exports.get(name)
        if where is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(where, package), name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
