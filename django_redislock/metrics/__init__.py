"""Numbers for operators: queue depth, ages, worker outcomes, held locks, lock timings.

``collect()`` reads them (a fixed number of round trips per alias, see
:mod:`.collect`); :func:`render_text` writes the Prometheus text format and
:func:`render_json` its JSON twin. The views in :mod:`.views` serve both behind
a token or a staff login; include ``django_redislock.urls`` to mount them.
"""

from __future__ import annotations

from .collect import collect
from .families import CONTENT_TYPE, Family, render_json, render_text
from .histograms import timings

__all__ = ["CONTENT_TYPE", "Family", "collect", "render_json", "render_text", "timings"]
