"""Deprecated: moved to :mod:`django_redislock.contrib.tasks.backend` (kept one release)."""

from __future__ import annotations

from typing import Any

from .._moved import forward


def __getattr__(name: str) -> Any:
    return forward("django_redislock.tasks.backend", "django_redislock.contrib.tasks.backend", name)
