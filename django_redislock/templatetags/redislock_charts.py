"""Template filters that draw a queue's rates (see ``admin/charts.py``)."""

from __future__ import annotations

from typing import Any

from django import template
from django.utils.safestring import SafeString

from ..admin.trends import sparkline
from ..queue.rates import Trend

register = template.Library()


@register.filter
def rate_spark(trend: Any) -> SafeString:
    """A queue's sparkline: enqueued, succeeded and failed per minute over the last hour."""
    return sparkline(trend)


@register.filter
def per_minute(trend: Any, outcome: str) -> str:
    """The outcome's mean rate per minute over the last five whole minutes, or "" (unread)."""
    if not isinstance(trend, Trend):
        return ""
    return f"{trend.per_minute(outcome):,.1f}"
