"""The Prometheus text exposition of a scrape, written by ``prometheus_client``.

Needs the ``prometheus`` extra (``pip install 'django-redislock[prometheus]'``);
importing this module without it raises
:class:`~django_redislock.exceptions.MissingDependency` naming the extra, and
the metrics view answers 501 while the JSON twin keeps working.

The values are read from Redis per scrape, so they are exported with
``prometheus_client``'s custom-collector API: each scrape's :class:`Family`
records become ``GaugeMetricFamily``/``CounterMetricFamily``/
``HistogramMetricFamily`` objects of a :class:`SnapshotCollector` registered
on a registry of that request alone. Nothing is registered on the library's
global ``REGISTRY``, so the app never adds series to (or collides with) the
project's own metrics, and two concurrent scrapes share no state.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

from ..exceptions import MissingDependency

try:
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.core import (
        CounterMetricFamily,
        GaugeMetricFamily,
        HistogramMetricFamily,
        Metric,
    )
    from prometheus_client.registry import Collector
except ImportError as exc:  # the optional extra is not installed
    raise MissingDependency(
        "The Prometheus metrics endpoint needs prometheus_client: "
        "pip install 'django-redislock[prometheus]' (the JSON endpoint works without it)."
    ) from exc

from .families import Family, HistogramSample, format_bound


def label_names(family: Family) -> list[str]:
    """The label names every sample of ``family`` carries, in the order of its first one.

    ``prometheus_client`` declares label names per family, so a family whose
    samples disagree is a programming error and raises ``ValueError``.
    """
    samples = [labels for _, labels, _ in family.samples]
    samples += [histogram.labels for histogram in family.histograms]
    names = list(samples[0]) if samples else []
    for labels in samples:
        if set(labels) != set(names):
            raise ValueError(f"{family.name}: samples with labels {names} and {list(labels)}")
    return names


def histogram_buckets(histogram: HistogramSample) -> list[tuple[str, float]]:
    """``(le, cumulative count)`` pairs, ending with ``+Inf`` as ``prometheus_client`` needs."""
    pairs = [(format_bound(bound), float(count)) for bound, count in histogram.buckets]
    return [*pairs, ("+Inf", float(histogram.count))]


def to_metric(family: Family) -> Metric:
    """``family`` as a ``prometheus_client`` metric family of its kind."""
    names = label_names(family)

    def values(labels: dict[str, str]) -> Sequence[str]:
        return [labels[name] for name in names]

    if family.kind == "histogram":
        histograms = HistogramMetricFamily(family.name, family.help, labels=names)
        for histogram in family.histograms:
            buckets = histogram_buckets(histogram)
            histograms.add_metric(values(histogram.labels), buckets, histogram.total)
        return histograms
    metric: GaugeMetricFamily | CounterMetricFamily
    if family.kind == "gauge":
        metric = GaugeMetricFamily(family.name, family.help, labels=names)
    elif family.kind == "counter":
        metric = CounterMetricFamily(family.name, family.help, labels=names)
    else:
        raise ValueError(f"{family.name}: unknown metric kind {family.kind!r}")
    for _, labels, value in family.samples:
        metric.add_metric(values(labels), value)
    return metric


class SnapshotCollector(Collector):
    """A custom collector that hands ``prometheus_client`` the families of one scrape."""

    def __init__(self, families: Iterable[Family]) -> None:
        self.families = list(families)

    def collect(self) -> Iterator[Metric]:
        for family in self.families:
            yield to_metric(family)


def render_text(families: Iterable[Family]) -> str:
    """The Prometheus text exposition (format 0.0.4) of ``families``."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SnapshotCollector(families))
    return generate_latest(registry).decode("utf-8")
