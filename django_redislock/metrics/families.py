"""Metric families and their two renderings: Prometheus text format 0.0.4 and JSON.

A hand-written renderer instead of ``prometheus_client``: the endpoint must not
add a dependency to every project that installs the app, and the registry
model of ``prometheus_client`` (module-global collectors) does not fit values
that are read from Redis per scrape. The tests parse the output with
``prometheus_client``'s own parser, so the format is held to the real thing.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

#: The content type Prometheus expects from a text exposition.
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

Labels = Mapping[str, str]


@dataclass
class Family:
    """One metric: a name, a type (gauge, counter, histogram), help text and samples.

    ``samples`` holds ``(suffix, labels, value)``; the suffix is ``""`` for gauges,
    ``"_total"`` for counters and ``"_bucket"``/``"_sum"``/``"_count"`` for histograms.
    """

    name: str
    kind: str
    help: str
    samples: list[tuple[str, dict[str, str], float]] = field(default_factory=list)

    def add(self, value: float, labels: Labels | None = None, suffix: str = "") -> None:
        """Record one sample."""
        self.samples.append((suffix, dict(labels or {}), float(value)))

    def add_histogram(
        self, buckets: Iterable[tuple[float, int]], total: float, count: int, labels: Labels
    ) -> None:
        """Record a histogram: cumulative ``(upper bound, count)`` pairs, sum and count."""
        for bound, cumulative in buckets:
            self.add(cumulative, {**labels, "le": format_bound(bound)}, "_bucket")
        self.add(count, {**labels, "le": "+Inf"}, "_bucket")
        self.add(total, labels, "_sum")
        self.add(count, labels, "_count")


def format_bound(bound: float) -> str:
    """A bucket bound as Prometheus writes it (``0.005``, ``1.0``, ``+Inf``)."""
    return "+Inf" if math.isinf(bound) else repr(float(bound))


def escape_label(value: str) -> str:
    r"""Escape a label value: backslash, double quote and newline (``\\``, ``\"``, ``\n``)."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def escape_help(text: str) -> str:
    """Escape HELP text: backslash and newline."""
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def format_value(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return str(int(value)) if value.is_integer() and abs(value) < 2**53 else repr(value)


def render_text(families: Iterable[Family]) -> str:
    """The Prometheus text exposition of ``families`` (one ``# HELP``/``# TYPE`` each)."""
    lines = []
    for family in families:
        lines.append(f"# HELP {family.name} {escape_help(family.help)}")
        lines.append(f"# TYPE {family.name} {family.kind}")
        for suffix, labels, value in family.samples:
            text = ",".join(f'{key}="{escape_label(str(v))}"' for key, v in labels.items())
            name = family.name + suffix + (f"{{{text}}}" if text else "")
            lines.append(f"{name} {format_value(value)}")
    return "\n".join(lines) + "\n"


def render_json(families: Iterable[Family]) -> dict[str, Any]:
    """The JSON twin: ``{name: {"type", "help", "samples": [{"labels", "value"}, ...]}}``."""
    out: dict[str, Any] = {}
    for family in families:
        out[family.name] = {
            "type": family.kind,
            "help": family.help,
            "samples": [
                {"name": family.name + suffix, "labels": labels, "value": json_value(value)}
                for suffix, labels, value in family.samples
            ],
        }
    return out


def json_value(value: float) -> float | int | str | None:
    """A sample value JSON can hold (infinities and NaN become strings)."""
    if math.isnan(value) or math.isinf(value):
        return format_value(value)
    return int(value) if value.is_integer() and abs(value) < 2**53 else value
