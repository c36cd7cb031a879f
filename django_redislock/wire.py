"""Decoding what Redis answers, and which redis-py is installed.

The small helpers every layer uses on replies; the request path of the hot
calls (the direct sender) is the call layer's, in
:mod:`django_redislock.calls.direct`.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import redis


def to_text(value: Any) -> str:
    """Decode a Redis bulk reply (bytes) or pass a str through."""
    return value.decode() if isinstance(value, bytes) else str(value)


@cache
def redis_py_version() -> tuple[int, ...]:
    """redis-py's major and minor version."""
    parts = []
    for part in redis.__version__.split(".")[:2]:
        digits = "".join(ch for ch in part if ch.isdigit())
        parts.append(int(digits or 0))
    return tuple(parts)
