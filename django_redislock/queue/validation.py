"""Argument checks shared by the queue API, run before anything is sent to Redis.

Each check raises :class:`~django_redislock.exceptions.InvalidArgument` naming
the argument, so a bad call never leaves half of its work in Redis.
"""

from __future__ import annotations

import math
from typing import Any

from ..conf import MAX_SECONDS
from ..exceptions import InvalidArgument

#: Longest queue name or task id (keys and hash fields stay small).
MAX_ID_LENGTH = 512
#: Most tasks one call may touch: a script's work stays bounded, and its id lists stay
#: below Lua's limit on unpacked arguments (about 8,000).
MAX_COUNT = 5_000


def check_name(name: Any) -> str:
    """A queue name: a non-empty string without braces (they would break the hash tag)."""
    if not isinstance(name, str):
        raise InvalidArgument(f"name must be a string, got {type(name).__name__}")
    if not name or len(name) > MAX_ID_LENGTH or "{" in name or "}" in name:
        raise InvalidArgument(
            f"name must be 1-{MAX_ID_LENGTH} characters without '{{' or '}}', got {name!r}"
        )
    return name


def check_id(value: Any, argument: str = "id") -> str:
    """A task id: a non-empty string of at most :data:`MAX_ID_LENGTH` characters."""
    if not isinstance(value, str):
        raise InvalidArgument(f"{argument} must be a string, got {type(value).__name__}")
    if not value or len(value) > MAX_ID_LENGTH:
        raise InvalidArgument(f"{argument} must be 1-{MAX_ID_LENGTH} characters, got {value!r}")
    return value


def check_seconds(value: Any, argument: str, *, allow_zero: bool = True) -> float:
    """A finite number of seconds in ``[0, MAX_SECONDS]`` (``> 0`` unless ``allow_zero``)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidArgument(f"{argument} must be a number of seconds, got {type(value).__name__}")
    low_ok = value >= 0 if allow_zero else value > 0
    if not math.isfinite(value) or not low_ok or value > MAX_SECONDS:
        bound = ">= 0" if allow_zero else "> 0"
        raise InvalidArgument(
            f"{argument} must be {bound} and <= {MAX_SECONDS:g} seconds, got {value!r}"
        )
    return float(value)


def check_count(value: Any, argument: str = "count", *, allow_zero: bool = False) -> int:
    """A task count in ``[1, MAX_COUNT]`` (or ``[0, ...]`` with ``allow_zero``)."""
    low = 0 if allow_zero else 1
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= MAX_COUNT:
        raise InvalidArgument(f"{argument} must be an integer {low}-{MAX_COUNT}, got {value!r}")
    return value


def check_ids(values: Any, argument: str = "ids") -> list[str]:
    """A list of task ids (a single string is refused: it is iterable but surely a mistake)."""
    if isinstance(values, (str, bytes)):
        raise InvalidArgument(f"{argument} must be a list of ids, not a single string")
    try:
        items = list(values)
    except TypeError:
        raise InvalidArgument(f"{argument} must be a list of ids") from None
    return [check_id(item, f"{argument}[{i}]") for i, item in enumerate(items)]
