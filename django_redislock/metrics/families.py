"""The numbers of one scrape as plain records, and their JSON rendering.

A scrape reads Redis once into :class:`Family` records; the Prometheus text
(:mod:`.prometheus`, with ``prometheus_client``) and the JSON twin
(:func:`render_json`, no dependency) are both written from them, so the two
endpoints always carry the same numbers and the JSON one works on a project
that did not install the ``prometheus`` extra.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

#: The content type of the Prometheus text exposition (format 0.0.4, which
#: ``prometheus_client.generate_latest`` writes).
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

Labels = Mapping[str, str]
#: ``(suffix, labels, value)``: the suffix is ``""`` for gauges and ``"_total"`` for counters.
Sample = tuple[str, dict[str, str], float]


@dataclass(frozen=True)
class HistogramSample:
    """One labelled histogram: cumulative ``(upper bound, count)`` pairs, sum and count.

    The ``+Inf`` bucket is not in ``buckets``: it is ``count``.
    """

    labels: dict[str, str]
    buckets: list[tuple[float, int]]
    total: float
    count: int


@dataclass
class Family:
    """One metric: a name, a type (gauge, counter, histogram), help text and samples."""

    name: str
    kind: str
    help: str
    samples: list[Sample] = field(default_factory=list)
    histograms: list[HistogramSample] = field(default_factory=list)

    def add(self, value: float, labels: Labels | None = None, suffix: str = "") -> None:
        """Record one sample of a gauge (no suffix) or a counter (suffix ``"_total"``)."""
        self.samples.append((suffix, dict(labels or {}), float(value)))

    def add_histogram(
        self, buckets: Iterable[tuple[float, int]], total: float, count: int, labels: Labels
    ) -> None:
        """Record a histogram: cumulative ``(upper bound, count)`` pairs, sum and count."""
        self.histograms.append(HistogramSample(dict(labels), list(buckets), total, count))

    def flat_samples(self) -> Iterator[Sample]:
        """Every sample as Prometheus names them: histograms as ``_bucket``/``_sum``/``_count``."""
        yield from self.samples
        for histogram in self.histograms:
            for bound, cumulative in histogram.buckets:
                le = format_bound(bound)
                yield ("_bucket", {**histogram.labels, "le": le}, float(cumulative))
            yield ("_bucket", {**histogram.labels, "le": "+Inf"}, float(histogram.count))
            yield ("_sum", histogram.labels, float(histogram.total))
            yield ("_count", histogram.labels, float(histogram.count))


def format_bound(bound: float) -> str:
    """A bucket bound as Prometheus writes it (``0.005``, ``1.0``, ``+Inf``)."""
    return "+Inf" if math.isinf(bound) else repr(float(bound))


def render_json(families: Iterable[Family]) -> dict[str, Any]:
    """The JSON twin: ``{name: {"type", "help", "samples": [{"labels", "value"}, ...]}}``."""
    out: dict[str, Any] = {}
    for family in families:
        out[family.name] = {
            "type": family.kind,
            "help": family.help,
            "samples": [
                {"name": family.name + suffix, "labels": labels, "value": json_value(value)}
                for suffix, labels, value in family.flat_samples()
            ],
        }
    return out


def json_value(value: float) -> float | int | str | None:
    """A sample value JSON can hold (infinities and NaN become strings)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return int(value) if value.is_integer() and abs(value) < 2**53 else value
