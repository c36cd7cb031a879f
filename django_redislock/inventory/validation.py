"""Argument checks of the inventory API, run before anything reaches Redis.

Each raises :class:`~django_redislock.exceptions.InvalidArgument` naming the
argument, so a bad call leaves the stock exactly as it was.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.utils import timezone

from ..exceptions import InvalidArgument
from ..queue.serializers import JSONSerializer

#: Longest item name or buyer id (they are parts of keys and set members).
MAX_NAME_LENGTH = 200
#: Most units one take, set or add may move (a typo guard far above any real order).
MAX_UNITS = 10**12
#: Largest ``data`` of one take, as JSON (it travels in the order task's payload).
MAX_DATA_BYTES = 64 * 1024
#: The encoder that checks ``data`` (built once: it is shared by threads, like the queue's).
JSON = JSONSerializer()
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


def check_data(data: Any) -> dict[str, Any]:
    """A take's ``data``: None or a dict that JSON can hold, at most ``MAX_DATA_BYTES`` encoded.

    Checked the same way with or without an order task, so a take never
    accepts ``data`` that an order task could not carry.
    """
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise InvalidArgument(f"data must be a dict or None, got {type(data).__name__}")
    try:
        size = len(JSON.dumps(data))
    except InvalidArgument as exc:
        raise InvalidArgument(f"data: {exc}") from None
    if size > MAX_DATA_BYTES:
        raise InvalidArgument(f"data is {size} bytes as JSON, over {MAX_DATA_BYTES}")
    return dict(data)


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
    micros = round(value.timestamp() * 1_000_000)
    if not 0 < micros < LATEST_MICROS:
        # 0 means "no bound" to the scripts, and Lua's doubles hold µs exactly below 2**53
        raise InvalidArgument(
            f"{argument} must be after 1970-01-01 00:00 UTC and before 2255, got {value!r}"
        )
    return str(micros)
