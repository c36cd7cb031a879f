"""Payload runners: how the worker runs a payload that is not a ``@task`` call.

An integration (for example :mod:`django_redislock.contrib.tasks`) registers a
runner for the payload key it writes; the worker looks the key up here instead
of importing the integration, so the queue package depends on nothing above it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .records import Task

PayloadRunner = Callable[[Task], Any]

_runners: dict[str, PayloadRunner] = {}


def register_payload_runner(key: str, runner: PayloadRunner) -> None:
    """Run payloads holding a string under ``key`` with ``runner(task)``.

    Registering the same key again replaces the runner (a reloaded module).
    """
    if not isinstance(key, str) or not key:
        raise ValueError(f"register_payload_runner: key must be a non-empty string, got {key!r}")
    _runners[key] = runner


def payload_runner(payload: object) -> PayloadRunner | None:
    """The registered runner for ``payload``, or ``None`` when no key matches."""
    if not isinstance(payload, dict):
        return None
    for key, runner in _runners.items():
        if isinstance(payload.get(key), str):
            return runner
    return None
