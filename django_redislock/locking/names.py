"""Lock names built from user input: any string becomes a usable, distinct lock name.

A name template of ``@distributed_lock`` is filled from a call's arguments, which
in a view come from the URL. :func:`~django_redislock.locking.keys.check_name`
refuses what the key layout cannot hold as-is (braces, control characters, more
than ``MAX_NAME_LENGTH`` characters), so the values are made safe first:

* each filled-in value has ``%``, ``{``, ``}``, control characters and every
  character that directly follows a field in the template percent-escaped (``{`` ->
  ``%7B``; in ``pair:{a}:{b}``, ``:`` -> ``%3A``); since ``%`` itself is
  escaped, two different values never give the same text, and since a value never
  holds the character that ends it, where each value ends is known: two different
  sets of values never give one name. A plain value (letters, digits, spaces, any
  other printable character) is unchanged. Two fields side by side (``{a}{b}``)
  have nothing between them, so such a template is refused;
* a name callable's result is used as-is when it is a valid name without ``%``,
  and escaped whole otherwise (so ``a{b`` and ``a%7Bb`` stay two names);
* a name still longer than ``MAX_NAME_LENGTH`` keeps a readable head and ends in
  ``%#`` and the SHA-256 of the whole name (``%#`` never appears in an escaped
  value, so a shortened name cannot equal a short one);
* a name that would be empty or only whitespace is escaped whole (``%`` for the
  empty name, ``%20`` for a space).

Only a string that cannot be encoded at all (a lone surrogate) is refused, with
:class:`~django_redislock.exceptions.InvalidArgument`.
"""

from __future__ import annotations

import functools
import hashlib
import re
import string
from typing import Any

from ..exceptions import InvalidArgument
from .keys import MAX_NAME_LENGTH, check_name

_ESCAPED = re.compile(r"[%{}\x00-\x1f\x7f]")
#: Characters of a name's readable head kept when the name is shortened to a digest.
HEAD_LENGTH = MAX_NAME_LENGTH - 80


def _percent(match: re.Match[str]) -> str:
    return f"%{ord(match.group()):02X}"


def escape_value(value: str, argument: str = "name") -> str:
    """``value`` with ``%``, braces and control characters percent-escaped.

    Raises :class:`InvalidArgument` naming ``argument`` for a string that is not
    valid Unicode text (a lone surrogate), which no Redis key can hold.
    """
    check_encodable(value, argument)
    return _ESCAPED.sub(_percent, value)


def check_encodable(value: str, argument: str) -> None:
    """Raise :class:`InvalidArgument` unless ``value`` can be encoded as UTF-8."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidArgument(
            f"{argument} {value!r} is not valid text ({exc.reason} at position {exc.start})"
        ) from exc


def fit(name: str) -> str:
    """``name`` made non-blank and at most ``MAX_NAME_LENGTH`` characters (see module docs)."""
    if not name:
        return "%"
    if name.isspace():
        name = "".join(f"%{byte:02X}" for byte in name.encode("utf-8"))
    if len(name) > MAX_NAME_LENGTH:
        digest = hashlib.sha256(name.encode("utf-8")).hexdigest()
        name = f"{name[:HEAD_LENGTH]}%#{digest}"
    return name


def safe_name(name: Any, argument: str = "name") -> str:
    """A usable lock name for ``name``: unchanged when it already is one, else escaped."""
    if not isinstance(name, str):
        raise InvalidArgument(f"{argument} must be a str, not {type(name).__name__}")
    check_encodable(name, argument)
    if "%" not in name:  # a name with "%" may be another name's escaped form: escaped too
        try:
            return check_name(name, argument)
        except InvalidArgument:
            pass
    return check_name(fit(escape_value(name, argument)), argument)


@functools.lru_cache(maxsize=256)
def _escaped_in(template: str) -> re.Pattern[str]:
    """What a value filled into ``template`` has escaped: the usual, and the template's text.

    Raises :class:`InvalidArgument` for two fields side by side (nothing tells where the
    first value ends).
    """
    ends: set[str] = set()  # the first character of the text after each field
    follows_field = False
    for literal, field, _spec, _conversion in string.Formatter().parse(template):
        if follows_field:
            if not literal and field is not None:
                raise InvalidArgument(
                    f"name template {template!r} has two fields side by side; put a "
                    f"separator between them (two pairs of values would give one name)"
                )
            ends.update(literal[:1])
        follows_field = field is not None
    extra = "".join(re.escape(char) for char in sorted(ends - set("%{}")))
    return re.compile(f"[%{{}}\x00-\x1f\x7f{extra}]")


class NameFormatter(string.Formatter):
    """:meth:`str.format` whose filled-in fields are escaped (see :func:`escape_value`)."""

    def __init__(self, escaped: re.Pattern[str] = _ESCAPED) -> None:
        self.escaped = escaped

    def format_field(self, value: Any, format_spec: str) -> str:
        text = super().format_field(value, format_spec)
        check_encodable(text, "a filled-in value")
        return self.escaped.sub(_percent, text)


def fill(template: str, args: Any, values: dict[str, Any]) -> str:
    """``template`` filled from ``args`` and ``values``, escaped and fitted: a usable name.

    Template errors (a missing field) raise what :meth:`str.format` raises.
    """
    filled = NameFormatter(_escaped_in(template)).vformat(template, tuple(args), values)
    check_encodable(filled, "the filled name template")
    return check_name(fit(filled), "the filled name template")
