"""URLs to include in a project: ``path("redislock/", include("django_redislock.urls"))``.

* ``metrics``: Prometheus text (``django_redislock:metrics``);
* ``metrics.json``: the same numbers as JSON (``django_redislock:metrics-json``).
"""

from __future__ import annotations

from django.urls import path

from .metrics import views

app_name = "django_redislock"

urlpatterns = [
    path("metrics", views.metrics, name="metrics"),
    path("metrics.json", views.metrics_json, name="metrics-json"),
]
