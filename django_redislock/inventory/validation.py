"""Argument checks of the inventory API, run before anything reaches Redis.

Each raises :class:`~django_redislock.exceptions.InvalidArgument` naming the
argument, so a bad call leaves the stock exactly as it was.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.utils import timezone

from ..exceptions import InvalidArgument

#: Longest item name or buyer id (they are parts of keys and set members).
MAX_NAME_LENGTH = 200
#: Most units one take, set or add may move (a typo guard far above any real order).
MAX_UNITS = 10**12


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
    """A buyer id: a non-empty string or an int (a user pk); returned as a string."""
    if isinstance(buyer, bool) or not isinstance(buyer, (str, int)):
        raise InvalidArgument(f"buyer must be a string or an int, got {type(buyer).__name__}")
    text = str(buyer)
    if not text.strip() or len(text) > MAX_NAME_LENGTH:
        raise InvalidArgument(f"buyer must be 1-{MAX_NAME_LENGTH} characters, got {buyer!r}")
    return text


def check_units(value: Any, argument: str, *, allow_zero: bool = False) -> int:
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
    return str(round(value.timestamp() * 1_000_000))
