"""The metrics views: Prometheus text and its JSON twin, for a token or a staff user.

The Prometheus view needs ``prometheus_client`` (the ``prometheus`` extra) and
answers 501 naming the extra without it; the JSON view needs nothing more.

Access is granted to a request that sends ``Authorization: Bearer <token>`` with
a token from ``REDISLOCK_METRICS_TOKEN`` (a string, or a list to rotate tokens),
or to a logged-in active staff user. Without either the answer is 401 (a token
was sent but is wrong) or 403; with no token configured only staff get in, so
including the URLs never publishes numbers by accident.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from ..exceptions import MissingDependency
from .collect import collect
from .families import CONTENT_TYPE, render_json

TOKEN_SETTING = "REDISLOCK_METRICS_TOKEN"

View = Callable[[HttpRequest], HttpResponse]


def configured_tokens() -> list[str]:
    """The accepted tokens (read per request, so ``override_settings`` works)."""
    value = getattr(settings, TOKEN_SETTING, None)
    if not value:
        return []
    tokens = [value] if isinstance(value, str) else list(value)
    return [token for token in tokens if isinstance(token, str) and token]


def bearer_token(request: HttpRequest) -> str | None:
    """The token of an ``Authorization: Bearer`` header, or None."""
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


def denied(request: HttpRequest) -> HttpResponse | None:
    """None when the request may read the metrics, else the 401/403 response."""
    sent = bearer_token(request)
    if sent is not None:
        # compare with every token so the time taken does not tell which one nearly matched
        matches = [hmac.compare_digest(sent.encode(), t.encode()) for t in configured_tokens()]
        if any(matches):
            return None
        response = HttpResponse("Invalid metrics token.\n", status=401, content_type="text/plain")
        response["WWW-Authenticate"] = 'Bearer realm="redislock-metrics"'
        return response
    user = getattr(request, "user", None)
    if user is not None and user.is_active and user.is_staff:
        return None
    return HttpResponse(
        f"Metrics need a staff login or 'Authorization: Bearer <token>' ({TOKEN_SETTING}).\n",
        status=403,
        content_type="text/plain",
    )


@never_cache
@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    """Prometheus text exposition of queue, lock and worker numbers.

    Without ``prometheus_client`` (the ``prometheus`` extra) the answer is a 501
    that names the extra; the JSON twin needs no extra package.
    """
    refusal = denied(request)
    if refusal is not None:
        return refusal
    try:
        from .prometheus import render_text
    except MissingDependency as exc:
        return HttpResponse(f"{exc}\n", status=501, content_type="text/plain; charset=utf-8")
    return HttpResponse(render_text(collect()), content_type=CONTENT_TYPE)


@never_cache
@require_GET
def metrics_json(request: HttpRequest) -> HttpResponse:
    """The same numbers as JSON, for dashboards and scripts that do not speak Prometheus."""
    refusal = denied(request)
    if refusal is not None:
        return refusal
    return JsonResponse(render_json(collect()), json_dumps_params={"indent": 1})


__all__ = ["configured_tokens", "denied", "metrics", "metrics_json"]
