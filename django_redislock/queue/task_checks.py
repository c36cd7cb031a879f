"""Checks of ``@task`` options and of a call's arguments, made where the task is declared
or the call is queued, so a mistake fails in the caller with the argument's name, not in a
worker."""

from __future__ import annotations

import inspect
import math
from typing import Any

from ..exceptions import InvalidArgument


def check_exceptions(value: Any, argument: str) -> tuple[type[BaseException], ...]:
    """A tuple of exception classes (one class alone is taken as a tuple of one)."""
    if isinstance(value, type):
        value = (value,)
    if not isinstance(value, (tuple, list)) or not all(
        isinstance(item, type) and issubclass(item, BaseException) for item in value
    ):
        raise InvalidArgument(f"{argument} must be a tuple of exception classes, got {value!r}")
    return tuple(value)


def positional_bounds(signature: inspect.Signature) -> tuple[float, float]:
    """How many positional arguments alone bind to ``signature``: ``(fewest, most)``.

    ``(inf, -1)`` (nothing binds without keywords) when a keyword-only parameter
    has no default; ``most`` is infinite with ``*args``.
    """
    fewest, most = 0, 0
    unbounded = False
    for parameter in signature.parameters.values():
        kind = parameter.kind
        if kind in (parameter.POSITIONAL_ONLY, parameter.POSITIONAL_OR_KEYWORD):
            most += 1
            if parameter.default is parameter.empty:
                fewest = most
        elif kind is parameter.VAR_POSITIONAL:
            unbounded = True
        elif kind is parameter.KEYWORD_ONLY and parameter.default is parameter.empty:
            return (math.inf, -1)
    return (fewest, math.inf if unbounded else most)
