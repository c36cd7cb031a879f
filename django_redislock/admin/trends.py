"""Rates and trends for the dashboard pages: read in one pipeline per alias, drawn as SVG.

The overview and the flash-sale panel show a sparkline per queue (enqueued,
succeeded and failed per minute over the hour); the queue page shows a bar
chart per outcome, per minute and per second, and the hour's failures by
exception type. The numbers come from :mod:`django_redislock.queue.rates`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.utils.safestring import SafeString

from ..queue.rates import DAY, OUTCOMES, WEEK, LongTrend, Trend, parse
from .charts import LABELS, long_bars, minute_bars, second_bars, spark_html

#: What the sparklines draw.
SPARK_OUTCOMES = ("enqueued", "succeeded", "failed")


def trend_call(queue: Any) -> tuple[str, list[str], list[Any]]:
    """The rates script of ``queue``, to send in the pipeline of a page's other scripts."""
    return ("rates_read", [queue.rates_key], [])


def trend_of(reply: Any) -> Trend | Exception:
    """The trend in a rates script's reply, or the error that replaced it (shown, not raised)."""
    if isinstance(reply, Exception):
        return reply
    try:
        return parse(reply)
    except (ValueError, IndexError, TypeError) as exc:  # not the app's reply: shown as such
        return exc


def trend_or_none(reply: Any) -> Trend | None:
    """The trend of ``reply``, or None when it could not be read (the overview draws nothing)."""
    trend = trend_of(reply)
    return trend if isinstance(trend, Trend) else None


def sparkline(trend: Trend | None) -> SafeString:
    """The overview's chart of one queue (nothing when its rates could not be read)."""
    return spark_html(trend if isinstance(trend, Trend) else None, SPARK_OUTCOMES)


@dataclass
class OutcomeRow:
    """One outcome on the queue page: its charts and numbers."""

    outcome: str
    label: str
    last_hour: int
    per_minute: float
    per_second: float
    minutes: SafeString
    seconds: SafeString


def outcome_rows(trend: Trend) -> list[OutcomeRow]:
    """The queue page's table of charts, one row per outcome."""
    rows = []
    for outcome in OUTCOMES:
        recent = trend.seconds[outcome][-61:-1]  # the last whole minute of seconds
        rows.append(
            OutcomeRow(
                outcome,
                LABELS[outcome],
                trend.total(outcome),
                trend.per_minute(outcome),
                sum(recent) / 60,
                minute_bars(trend, outcome),
                second_bars(trend, outcome),
            )
        )
    return rows


@dataclass
class LongRow:
    """One outcome's day and week on the queue page."""

    outcome: str
    label: str
    last_day: int
    last_week: int
    day: SafeString
    week: SafeString


def long_rows(trend: LongTrend) -> list[LongRow]:
    """The queue page's day and week charts, one row per outcome."""
    rows = []
    for outcome in OUTCOMES:
        day, week = trend.counts[DAY[0]][outcome], trend.counts[WEEK[0]][outcome]
        rows.append(
            LongRow(
                outcome,
                LABELS[outcome],
                sum(day),
                sum(week),
                long_bars(day, trend.starts[DAY[0]], DAY[1], outcome),
                long_bars(week, trend.starts[WEEK[0]], WEEK[1], outcome),
            )
        )
    return rows
