"""The URLs a project adds to serve the metrics (used by tests/test_metrics.py)."""

from django.urls import include, path

urlpatterns = [path("redislock/", include("django_redislock.urls"))]
