"""The task page's history of runs and the facts drawn from it (function, runtime)."""

from __future__ import annotations

import json
import re
from typing import Any

from ..queue.history import Run, parse


def history_call(queue: Any, id: str) -> tuple[str, list[str], list[Any]]:
    """The history script for task ``id``, to send in the task page's pipeline."""
    return ("history_get", [queue.history_key], [id])


def parse_history(reply: Any) -> list[Run]:
    return parse(reply)


#: The head of a ``@task`` payload cut short (the task page reads at most 64 KiB of it).
HEAD = re.compile(r'^\{"(?:django_)?task": ?"([^"\\]{1,300})"')


def function_name(payload_text: str) -> str:
    """The task function a JSON payload names (``task`` or ``django_task``), or ""."""
    try:
        payload = json.loads(payload_text)
    except (ValueError, RecursionError):  # cut short, or not JSON: the envelope's head, if any
        found = HEAD.match(payload_text)
        return found[1] if found else ""
    if isinstance(payload, dict):
        for key in ("task", "django_task"):
            if isinstance(payload.get(key), str):
                return str(payload[key])
    return ""
