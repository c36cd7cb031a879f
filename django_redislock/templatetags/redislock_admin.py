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
