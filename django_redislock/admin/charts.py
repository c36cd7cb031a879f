"""Small server-rendered SVG charts of a queue's rates (no script, no CDN, no build step).

Every chart is plain inline SVG built here from numbers this module computes;
the only text in it (labels, exception type names, queue names in titles) goes
through :func:`~django.utils.html.escape`, so a hostile exception type name or
queue name is shown, never interpreted. The exact numbers are in ``<title>``
elements (the browser's tooltip) and in an ``aria-label``, so a chart can be
read without a mouse or a screen.
"""

from __future__ import annotations

from datetime import datetime
from datetime import timezone as dt_timezone

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from ..queue.rates import Trend

#: Colours per outcome (the admin's own palette where it has one).
COLOURS = {
    "enqueued": "#417690",
    "succeeded": "#2e7d32",
    "failed": "#ba2121",
    "retried": "#c77c02",
    "dead": "#5a1010",
}
LABELS = {
    "enqueued": "enqueued",
    "succeeded": "succeeded",
    "failed": "failed",
    "retried": "retried",
    "dead": "dead-lettered",
}


def clock(epoch: int, seconds: bool = False, date: bool = False) -> str:
    """``HH:MM`` (or ``HH:MM:SS``, or ``Sun 29 Nov HH:MM``) UTC of an epoch second."""
    moment = datetime.fromtimestamp(epoch, dt_timezone.utc)
    return moment.strftime("%H:%M:%S" if seconds else "%a %d %b %H:%M" if date else "%H:%M")


#: What one bar of a chart spans, by its seconds.
UNITS = {1: "second", 60: "minute", 900: "15 minutes", 7200: "2 hours"}


def spark(trend: Trend, outcomes: tuple[str, ...], width: int = 180, height: int = 28) -> str:
    """A sparkline of ``outcomes`` per minute over the hour, one polyline each.

    One ``<title>`` for the whole chart (the hour's totals and the last five
    minutes' mean rate per outcome): a tooltip per point would make the overview
    heavy with many queues.
    """
    series = [trend.minutes.get(outcome, []) for outcome in outcomes]
    top = max((max(values, default=0) for values in series), default=0) or 1
    lines = []
    for outcome, values in zip(outcomes, series, strict=True):
        if not any(values):
            continue  # a flat zero line would cover the others' baseline in its colour (red)
        step = width / max(len(values) - 1, 1)
        points = " ".join(
            f"{i * step:.1f},{height - 1 - (height - 2) * value / top:.1f}"
            for i, value in enumerate(values)
        )
        lines.append(
            f'<polyline fill="none" stroke="{COLOURS[outcome]}" stroke-width="1.5" '
            f'vector-effect="non-scaling-stroke" '
            f'points="{points}"/>'
        )
    summary = "; ".join(
        f"{LABELS[o]}: {trend.total(o):,} in the last hour, {trend.per_minute(o):,.1f}/min "
        f"over the last 5 min"
        for o in outcomes
    )
    text = escape(f"Per minute since {clock(trend.minute_start)} UTC. {summary}")
    return (
        f'<svg class="rate-spark" role="img" aria-label="{text}" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" preserveAspectRatio="none" '
        f'xmlns="http://www.w3.org/2000/svg">'
        f"<title>{text}</title>{''.join(lines)}</svg>"
    )


def bars(
    values: list[int],
    start: int,
    step: int,
    outcome: str,
    *,
    width: int = 360,
    height: int = 60,
    css: str = "rate-bars",
) -> str:
    """A bar chart of one outcome, one bar per bucket, each with its own ``<title>``."""
    top = max(values, default=0) or 1
    bar = width / max(len(values), 1)
    label = LABELS[outcome]
    rects = []
    long = step >= 900
    for i, value in enumerate(values):
        moment = clock(start + i * step, seconds=step < 60, date=long)
        h = (height - 1) * value / top
        tip = escape(f"{moment} UTC: {value:,} {label}")
        rects.append(
            f'<rect x="{i * bar:.1f}" y="{height - h:.1f}" width="{max(bar - 1, 1):.1f}" '
            f'height="{max(h, 0.5 if value else 0):.1f}" fill="{COLOURS[outcome]}">'
            f"<title>{tip}</title></rect>"
        )
    unit = UNITS.get(step, f"{step} s")
    text = escape(
        f"{label} per {unit} from {clock(start, step < 60, long)} UTC: {sum(values):,} in all, "
        f"at most {max(values, default=0):,} in one {'bar' if long else unit}"
    )
    return (
        f'<svg class="{css}" role="img" aria-label="{text}" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" preserveAspectRatio="none" '
        'xmlns="http://www.w3.org/2000/svg">'
        f'<title>{text}</title><line x1="0" y1="{height - 0.5}" x2="{width}" '
        f'y2="{height - 0.5}" stroke="#ccc"/>{"".join(rects)}</svg>'
    )


def spark_html(trend: Trend | None, outcomes: tuple[str, ...]) -> SafeString:
    """The sparkline as safe HTML ("" without a trend: the queue could not be read)."""
    if trend is None:
        return mark_safe("")
    return mark_safe(spark(trend, outcomes))


def minute_bars(trend: Trend, outcome: str) -> SafeString:
    values = trend.minutes.get(outcome, [])
    return mark_safe(bars(values, trend.minute_start, 60, outcome))


def second_bars(trend: Trend, outcome: str) -> SafeString:
    values = trend.seconds.get(outcome, [])
    return mark_safe(bars(values, trend.second_start, 1, outcome))


def long_bars(values: list[int], start: int, step: int, outcome: str) -> SafeString:
    """A day's or a week's bars of one outcome (15-minute or two-hour buckets)."""
    return mark_safe(bars(values, start, step, outcome, css="rate-bars-long"))
