"""Django tasks-framework functions run by RedisTaskBackend in tests/test_django_tasks.py."""

from __future__ import annotations

import asyncio
from typing import Any

try:
    from django.tasks import task
except ImportError:
    from django_tasks import task  # type: ignore[no-redef]

from django_redislock import queues

#: Where the calls record themselves (a list on the default queue alias's server).
RUNS_KEY = "test:{djruns}:list"


def record(entry: str) -> None:
    queues["default"].client.rpush(RUNS_KEY, entry)  # type: ignore[attr-defined]


def runs() -> list[str]:
    client = queues["default"].client  # type: ignore[attr-defined]
    return [item.decode() for item in client.lrange(RUNS_KEY, 0, -1)]


@task(queue_name="django-tasks")
def add(a: int, b: int) -> int:
    record(f"add:{a}+{b}")
    return a + b


@task(queue_name="django-tasks")
def explode(message: str) -> None:
    record(f"explode:{message}")
    raise ValueError(message)


@task(queue_name="django-tasks")
async def slow_echo(value: Any) -> dict[str, Any]:
    await asyncio.sleep(0.001)
    record(f"echo:{value}")
    return {"echo": value, "items": (1, 2)}


@task(queue_name="django-tasks", takes_context=True)
def with_context(context: Any, tag: str) -> dict[str, Any]:
    record(f"context:{tag}")
    return {"attempt": context.attempt, "id": context.task_result.id}


@task
def on_default_queue() -> str:
    return "ok"


@task(queue_name="django-tasks")
def returns_object() -> object:
    return object()
