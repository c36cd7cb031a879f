"""Template filters of the admin dashboard."""

from __future__ import annotations

from typing import Any

from django import template

register = template.Library()


@register.filter
def count(value: Any) -> str:
    """``1234567`` as ``1,234,567``: queue depths are read at a glance, whatever the locale."""
    if isinstance(value, bool) or not isinstance(value, int):
        return "" if value is None else str(value)
    return f"{value:,}"


#: Characters of an error a table cell shows (the task page shows all of it).
ERROR_PREVIEW = 120


@register.filter
def error_preview(value: Any) -> str:
    """The first line of a recorded error (``Type: message``), cut to :data:`ERROR_PREVIEW`.

    A recorded error is its message, a blank line and the *end* of its traceback,
    which begins wherever the cut fell, often in the middle of a file path: a
    preview of the first 120 characters of a short message used to run into it.
    """
    text = "" if value is None else str(value)
    head = text.strip().split("\n", 1)[0].strip()
    return head if len(head) <= ERROR_PREVIEW else head[: ERROR_PREVIEW - 1] + "…"


@register.filter
def error_text(value: Any) -> str:
    """A recorded error whose traceback tail starts at a line, with ``[…]`` where it was cut."""
    text = "" if value is None else str(value)
    message, gap, tail = text.partition("\n\n")
    if not gap or tail.startswith(("Traceback", "[")) or "\n" not in tail:
        return text
    return f"{message}\n\n[…]\n{tail.split(chr(10), 1)[1]}"
