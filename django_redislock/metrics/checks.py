"""The system check of the metrics endpoint: its URLs mounted without ``prometheus_client``.

Without the ``prometheus`` extra the Prometheus view answers 501 (the JSON
twin works), which a scraper reports only as a failing target; the check says
so at deploy time instead. It reads the URLconf (as Django's own URL checks
do) and never connects to Redis.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.core.checks import CheckMessage, Warning
from django.urls import URLPattern, URLResolver, get_resolver

from . import views

CHECK_ID = "redislock.W004"


def prometheus_installed() -> bool:
    """True when ``prometheus_client`` can be imported."""
    try:
        import prometheus_client  # noqa: F401
    except ImportError:
        return False
    return True


def serves(patterns: Iterable[Any], view: Any) -> bool:
    """True when ``view`` is the callback of a pattern in ``patterns`` or their includes."""
    for pattern in patterns:
        if isinstance(pattern, URLResolver) and serves(pattern.url_patterns, view):
            return True
        if isinstance(pattern, URLPattern) and pattern.callback is view:
            return True
    return False


def metrics_mounted() -> bool:
    """True when the project's URLconf routes a URL to the Prometheus metrics view.

    A URLconf that cannot be loaded counts as not mounted: Django's own URL
    checks report that error.
    """
    try:
        patterns = get_resolver().url_patterns
    except Exception:
        return False
    return serves(patterns, views.metrics)


def check_prometheus() -> list[CheckMessage]:
    """W004 when the metrics URLs are mounted but ``prometheus_client`` is missing."""
    if prometheus_installed() or not metrics_mounted():
        return []
    return [
        Warning(
            "The metrics URLs (django_redislock.urls) are mounted but prometheus_client is "
            "not installed: the Prometheus endpoint answers 501 (the JSON endpoint works).",
            hint="pip install 'django-redislock[prometheus]', or do not include the metrics URLs.",
            id=CHECK_ID,
        )
    ]
