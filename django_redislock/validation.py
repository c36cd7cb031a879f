"""Argument checks of the queue and inventory APIs, run before anything reaches Redis.

Each check raises :class:`~django_redislock.exceptions.InvalidArgument` naming
the argument, so a bad call never leaves half of its work in Redis. Checks with
a lower bound take ``allow_zero`` as a required keyword: every call says whether
zero is accepted.
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any

from django.utils import timezone

from .conf import MAX_SECONDS
from .exceptions import InvalidArgument

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


def check_seconds(value: Any, argument: str, *, allow_zero: bool) -> float:
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


def check_count(value: Any, argument: str = "count", *, allow_zero: bool) -> int:
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


#: Longest item name or buyer id (they are parts of keys and set members).
MAX_NAME_LENGTH = 200
#: Most units one take, set or add may move (a typo guard far above any real order).
MAX_UNITS = 10**12
#: Window bounds are microseconds since the epoch below this (exact in a Lua double).
LATEST_MICROS = 2**53


def check_item(item: Any) -> str:
    """An item name: 1-200 characters, no braces (they would break the hash tag)."""
    if not isinstance(item, str):
        raise InvalidArgument(f"item must be a string, got {type(item).__name__}")
    if not item or len(item) > MAX_NAME_LENGTH or "{" in item or "}" in item:
        raise InvalidArgument(
            f"item must be 1-{MAX_NAME_LENGTH} characters without '{{' or '}}', got {item!r}"
        )
    return item


def check_buyer(buyer: Any) -> str:
    """A buyer id, normalised: ``str(buyer)`` without surrounding whitespace.

    An int (a user pk) and its string are one buyer, and so are ids that differ
    only by surrounding whitespace (``" 42"``, ``"42\\n"``, ``42``): a form field or
    a header read with a stray space or newline cannot buy twice. Nothing else is
    changed (case and inner characters count). Empty after stripping, or longer
    than :data:`MAX_NAME_LENGTH`, is refused.
    """
    if isinstance(buyer, bool) or not isinstance(buyer, (str, int)):
        raise InvalidArgument(f"buyer must be a string or an int, got {type(buyer).__name__}")
    text = str(buyer).strip()
    if not text or len(text) > MAX_NAME_LENGTH:
        raise InvalidArgument(
            f"buyer must be 1-{MAX_NAME_LENGTH} characters besides surrounding whitespace, "
            f"got {buyer!r}"
        )
    return text


def check_units(value: Any, argument: str, *, allow_zero: bool) -> int:
    """A whole number of units, ``>= 1`` (``>= 0`` with ``allow_zero``)."""
    low = 0 if allow_zero else 1
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= MAX_UNITS:
        raise InvalidArgument(f"{argument} must be an integer {low}-{MAX_UNITS}, got {value!r}")
    return value


def window_micros(value: Any, argument: str) -> str:
    """A window bound as the set script's ARGV: ``""`` keep, ``"0"`` none, else µs.

    ``...`` (Ellipsis, the default) keeps the stored bound, ``None`` removes it,
    and a datetime sets it (a naive one is read in the current time zone).
    """
    if value is ...:
        return ""
    if value is None:
        return "0"
    if not isinstance(value, datetime):
        raise InvalidArgument(f"{argument} must be a datetime or None, got {type(value).__name__}")
    if timezone.is_naive(value):
        value = timezone.make_aware(value)
    micros = round(value.timestamp() * 1_000_000)
    if not 0 < micros < LATEST_MICROS:
        # 0 means "no bound" to the scripts, and Lua's doubles hold µs exactly below 2**53
        raise InvalidArgument(
            f"{argument} must be after 1970-01-01 00:00 UTC and before 2255, got {value!r}"
        )
    return str(micros)
