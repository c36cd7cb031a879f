"""Every check of an argument or a setting value, run before anything reaches Redis.

One rule per kind of value, in two forms:

* a *problem* function (``positive_seconds(value)``, ``boolean(value)``, ...)
  returns what is wrong with the value as a phrase (``"must be > 0 and <= 604800
  seconds, got 0"``), or None. The settings schema (:mod:`django_redislock.conf`)
  is built from these; the handlers and the system checks put the setting's name
  in front (``OPTIONS['DEFAULT_TTL'] must be ...``) and raise or report a
  configuration error (``ImproperlyConfigured``).
* a *check* function (``check_seconds(value, "ttl", allow_zero=False)``) returns
  the value, or raises :class:`~django_redislock.exceptions.InvalidArgument` (a
  ``ValueError``) whose message is the argument's name followed by the same
  phrase, so a bad call never leaves half of its work in Redis.

Checks with a lower bound take ``allow_zero`` as a required keyword: every call
says whether zero is accepted.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from django.utils import timezone

from .exceptions import InvalidArgument

#: Longest TTL or timeout accepted anywhere, in seconds (one week). Longer values are
#: almost always a unit mistake (milliseconds passed as seconds).
MAX_SECONDS = 7 * 24 * 3600.0
#: Longest queue name or task id (keys and hash fields stay small).
MAX_ID_LENGTH = 512
#: Longest lock name, in characters.
MAX_LOCK_NAME_LENGTH = 512
#: Longest item name or buyer id (they are parts of keys and set members).
MAX_NAME_LENGTH = 200
#: Most tasks one call may touch: a script's work stays bounded, and its id lists stay
#: below Lua's limit on unpacked arguments (about 8,000).
MAX_COUNT = 5_000
#: Most units one take, set or add may move (a typo guard far above any real order).
MAX_UNITS = 10**12
#: Window bounds are microseconds since the epoch below this (exact in a Lua double).
LATEST_MICROS = 2**53

_BAD_LOCK_NAME = re.compile(r"[{}\x00-\x1f\x7f\ud800-\udfff]")

# -- problems: a phrase saying what is wrong with a value, or None ---------------------------


def seconds_problem(value: Any, *, allow_zero: bool) -> str | None:
    """A number of seconds in ``(0, MAX_SECONDS]`` (``[0, ...]`` with ``allow_zero``).

    NaN and infinity fall outside the range, so they are refused too.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return f"must be a number of seconds, not {type(value).__name__}"
    low_ok = value >= 0 if allow_zero else value > 0
    if not (low_ok and value <= MAX_SECONDS):
        bound = ">= 0" if allow_zero else "> 0"
        return f"must be {bound} and <= {MAX_SECONDS:g} seconds, got {value!r}"
    return None


def integer_problem(value: Any, low: int, high: int | None = None) -> str | None:
    """A whole number (not a bool) from ``low`` to ``high`` (no upper bound when None)."""
    if (
        not isinstance(value, bool)
        and isinstance(value, int)
        and low <= value
        and (high is None or value <= high)
    ):
        return None
    if high is not None:
        wanted = f"an integer {low}-{high}"
    else:
        wanted = "a positive integer" if low == 1 else f"an integer >= {low}"
    return f"must be {wanted}, got {value!r}"


def positive_seconds(value: Any) -> str | None:
    return seconds_problem(value, allow_zero=False)


def non_negative_seconds(value: Any) -> str | None:
    return seconds_problem(value, allow_zero=True)


def optional_positive_seconds(value: Any) -> str | None:
    return None if value is None else positive_seconds(value)


def positive_int(value: Any) -> str | None:
    return integer_problem(value, 1)


def non_negative_int(value: Any) -> str | None:
    return integer_problem(value, 0)


def optional_positive_int(value: Any) -> str | None:
    return None if value is None else positive_int(value)


def boolean(value: Any) -> str | None:
    return None if isinstance(value, bool) else f"must be True or False, got {value!r}"


def mapping(value: Any) -> str | None:
    return None if isinstance(value, Mapping) else f"must be a dict, got {type(value).__name__}"


def optional_dotted_path(value: Any) -> str | None:
    if value is None or (isinstance(value, str) and "." in value) or isinstance(value, type):
        return None
    return f"must be a dotted import path or a class, got {value!r}"


def non_empty_string(value: Any) -> str | None:
    return (
        None if isinstance(value, str) and value else f"must be a non-empty string, got {value!r}"
    )


def sentinel_list(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, (list, tuple)) or not value:
        return "must be a non-empty list of (host, port) pairs or 'host:port' strings"
    for item in value:
        if isinstance(item, str) and item.rpartition(":")[2].isdigit():
            continue
        if isinstance(item, (list, tuple)) and len(item) == 2 and isinstance(item[1], int):
            continue
        return f"has a bad entry {item!r}; use (host, port) or 'host:port'"
    return None


def drift_factor(value: Any) -> str | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 0.5:
        return f"must be a number from 0 to 0.5 (a share of the ttl), got {value!r}"
    return None


def one_of(*choices: str) -> Callable[[Any], str | None]:
    def check(value: Any) -> str | None:
        return None if value in choices else f"must be one of {', '.join(choices)}; got {value!r}"

    return check


def text_problem(value: Any, max_length: int, *, braces: bool) -> str | None:
    """A string of 1 to ``max_length`` characters; without braces unless ``braces``.

    Braces in a name that becomes part of a key would change its cluster hash tag.
    """
    if not isinstance(value, str):
        return f"must be a string, got {type(value).__name__}"
    if not value or len(value) > max_length or (not braces and ("{" in value or "}" in value)):
        without = "" if braces else " without '{' or '}'"
        return f"must be 1-{max_length} characters{without}, got {value!r}"
    return None


# -- checks: the value, or InvalidArgument naming the argument --------------------------------


def _check(problem: str | None, argument: str) -> None:
    if problem:
        raise InvalidArgument(f"{argument} {problem}")


def check_seconds(value: Any, argument: str, *, allow_zero: bool) -> float:
    """A finite number of seconds in ``[0, MAX_SECONDS]`` (``> 0`` unless ``allow_zero``)."""
    _check(seconds_problem(value, allow_zero=allow_zero), argument)
    return float(value)


def check_int(value: Any, argument: str, low: int, high: int | None = None) -> int:
    """A whole number from ``low`` to ``high`` (no upper bound when None)."""
    _check(integer_problem(value, low, high), argument)
    return cast(int, value)


def check_bool(value: Any, argument: str) -> bool:
    """``True`` or ``False`` (not 1, not "yes")."""
    _check(boolean(value), argument)
    return cast(bool, value)


def check_count(value: Any, argument: str = "count", *, allow_zero: bool) -> int:
    """A task count in ``[1, MAX_COUNT]`` (or ``[0, ...]`` with ``allow_zero``)."""
    return check_int(value, argument, 0 if allow_zero else 1, MAX_COUNT)


def check_units(value: Any, argument: str, *, allow_zero: bool) -> int:
    """A whole number of units, ``>= 1`` (``>= 0`` with ``allow_zero``)."""
    return check_int(value, argument, 0 if allow_zero else 1, MAX_UNITS)


def check_limits(
    time_limit: Any,
    soft_time_limit: Any,
    lease: float | None = None,
    names: tuple[str, str] = ("time_limit", "soft_time_limit"),
) -> tuple[float | None, float | None]:
    """Validate a ``(time_limit, soft_time_limit)`` pair; returns them as floats or None.

    Each is > 0 seconds or None; a soft limit must be below the hard one; and a soft
    limit with no hard limit must be below ``lease`` (when known): without a hard limit
    the lease keeper renews a run only for its lease, so that lease would end first.
    ``names`` are what the messages call the two values.
    """
    hard = None if time_limit is None else check_seconds(time_limit, names[0], allow_zero=False)
    soft = (
        None
        if soft_time_limit is None
        else check_seconds(soft_time_limit, names[1], allow_zero=False)
    )
    if hard is not None and soft is not None and soft >= hard:
        raise InvalidArgument(
            f"{names[1]} ({soft:g} s) must be below {names[0]} ({hard:g} s): the soft limit "
            "is the task's chance to clean up before the hard one ends it"
        )
    if hard is None and soft is not None and lease is not None and soft >= lease:
        raise InvalidArgument(
            f"{names[1]} ({soft:g} s) is not below the lease ({lease:g} s) and there is no "
            f"{names[0]}: the lease keeper renews a run without a hard limit only for its "
            "lease, so another worker could take the task first; set a time_limit or a "
            "longer lease"
        )
    return hard, soft


def check_name(name: Any, argument: str = "name") -> str:
    """A queue name: a non-empty string without braces (they would break the hash tag)."""
    _check(text_problem(name, MAX_ID_LENGTH, braces=False), argument)
    return cast(str, name)


def check_item(item: Any) -> str:
    """An item name: 1-200 characters, no braces (they would break the hash tag)."""
    _check(text_problem(item, MAX_NAME_LENGTH, braces=False), "item")
    return cast(str, item)


def check_id(value: Any, argument: str = "id") -> str:
    """A task id: a non-empty string of at most :data:`MAX_ID_LENGTH` characters."""
    _check(text_problem(value, MAX_ID_LENGTH, braces=True), argument)
    return cast(str, value)


def check_ids(values: Any, argument: str = "ids") -> list[str]:
    """A list of task ids (a single string is refused: it is iterable but surely a mistake)."""
    if isinstance(values, (str, bytes)):
        raise InvalidArgument(f"{argument} must be a list of ids, not a single string")
    try:
        items = list(values)
    except TypeError:
        raise InvalidArgument(f"{argument} must be a list of ids") from None
    return [check_id(item, f"{argument}[{i}]") for i, item in enumerate(items)]


def check_lock_name(name: Any, argument: str = "name") -> str:
    """Return ``name`` if it can be a lock name, else raise :class:`InvalidArgument`.

    Braces would change the cluster hash tag and control characters make names
    unreadable in the admin, so both are refused rather than escaped; a lone
    surrogate is not text at all (it cannot be encoded) and is refused too.
    """
    if not isinstance(name, str):
        raise InvalidArgument(f"{argument} must be a str, not {type(name).__name__}")
    if not name or name.isspace():
        raise InvalidArgument(f"{argument} must be a non-empty string")
    if len(name) > MAX_LOCK_NAME_LENGTH:
        raise InvalidArgument(f"{argument} is longer than {MAX_LOCK_NAME_LENGTH} characters")
    bad = _BAD_LOCK_NAME.search(name)
    if bad:
        if "\ud800" <= bad.group() <= "\udfff":  # not text: no Redis key can hold it
            raise InvalidArgument(
                f"{argument} {name!r} is not valid text (a lone surrogate at position "
                f"{bad.start()})"
            )
        raise InvalidArgument(
            f"{argument} {name!r} contains braces or control characters, which would break "
            f"the Redis key layout"
        )
    return name


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


#: Seconds per period letter of a rate string.
PERIODS = {"s": 1, "m": 60, "h": 3600}
#: How much of a second's worth of tasks a limit admits at once (at least one task).
BURST_WINDOW = 0.1
_RATE = re.compile(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*/\s*([smh])\s*")


@dataclass(frozen=True)
class Rate:
    """A parsed rate limit: ``text`` as written, µs between two tasks, tasks at once."""

    text: str
    interval: int
    burst: int

    @property
    def per_second(self) -> float:
        return 1_000_000 / self.interval


def parse_rate(value: Any, option: str = "rate") -> Rate:
    """Parse ``"N/s"``, ``"N/m"`` or ``"N/h"`` (N a positive number, at most 1,000,000/s).

    Anything else raises :class:`~django_redislock.exceptions.InvalidArgument`
    naming ``option`` (the argument or setting the value came from).
    """
    found = _RATE.fullmatch(value) if isinstance(value, str) else None
    if found is None:
        raise InvalidArgument(
            f'{option} must be a rate like "100/m": a positive number, "/" and s, m or h; '
            f"got {value!r}"
        )
    count, period = float(found.group(1)), found.group(2)
    interval = PERIODS[period] * 1_000_000 / count if count > 0 else math.inf
    if not 1 <= interval <= PERIODS["h"] * 1_000_000 * 1000:
        raise InvalidArgument(
            f"{option} must be between 1/1000h and 1000000/s, and positive; got {value!r}"
        )
    burst = max(1, int(BURST_WINDOW * 1_000_000 // interval))
    return Rate(f"{found.group(1)}/{period}", round(interval), burst)
