"""Numbers for operators: queue depth, ages, worker outcomes, held locks, lock timings.

``collect()`` reads them (a fixed number of round trips per alias, see
:mod:`.collect`); :func:`render_text` writes the Prometheus text format with
``prometheus_client`` (the ``prometheus`` extra) and :func:`render_json` its
JSON twin (no dependency). The views in :mod:`.views` serve both behind a token
or a staff login; include ``django_redislock.urls`` to mount them.
"""

from __future__ import annotations

from collections.abc import Iterable

from .collect import collect
from .families import CONTENT_TYPE, Family, render_json
from .histograms import timings


def render_text(families: Iterable[Family]) -> str:
    """The Prometheus text exposition of ``families``.

    Imports ``prometheus_client`` when first called, so this package (and the
    JSON twin) works without it; without it this raises
    :class:`~django_redislock.exceptions.MissingDependency` naming the
    ``prometheus`` extra.
    """
    from .prometheus import render_text as render

    return render(families)


__all__ = ["CONTENT_TYPE", "Family", "collect", "render_json", "render_text", "timings"]
