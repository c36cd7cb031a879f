"""The workers registry in the metrics scrape: ``redislock_workers`` and running tasks."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.test import override_settings

from django_redislock import queues
from django_redislock.queue.workers import beat, registry_keys

from .conftest import RedisTarget
from .test_metrics import TOKEN, samples, scrape, value

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.urls("tests.metrics_urls"),
]


@pytest.fixture
def alias(redis_target: RedisTarget) -> Iterator[Any]:
    params = {**redis_target.params(), "KEY_PREFIX": "test"}
    with override_settings(REDISLOCK_QUEUES={"default": params}, REDISLOCK_METRICS_TOKEN=TOKEN):
        yield queues["default"]


def record(queues: list[str], tasks: list[dict[str, Any]]) -> dict[str, Any]:
    return {"host": "h", "pid": 1, "queues": queues, "tasks": tasks, "up": 1.0}


def test_live_workers_and_running_tasks_per_queue(alias: Any) -> None:
    alias.queue("idle").enqueue("t")  # a known queue that no worker drains
    running = [{"id": "o-1", "queue": "orders", "age": 2.0}]
    beat(alias, "w1", 60, record(["orders", "emails"], running))
    beat(alias, "w2", 60, {**record(["orders"], []), "health": "wedged", "wedged": "loop"})
    beat(alias, "gone", 0.001, record(["orders"], []))  # expired at once: not counted
    found = samples(scrape().content.decode())
    workers, busy = "redislock_workers", "redislock_worker_running_tasks"
    assert value(found, workers, alias="default", queue="orders") == 2
    assert value(found, workers, alias="default", queue="emails") == 1
    assert value(found, workers, alias="default", queue="idle") == 0
    assert value(found, busy, alias="default", queue="orders") == 1
    wedged = "redislock_workers_wedged"  # counted live, and wedged
    assert value(found, wedged, alias="default", queue="orders") == 1
    assert value(found, wedged, alias="default", queue="emails") == 0
    assert value(found, busy, alias="default", queue="emails") == 0
    assert not [labels for (name, labels) in found if name == workers and ("queue", "x") in labels]
    data = scrape(path="/redislock/metrics.json").json()
    assert data[workers]["type"] == "gauge" and len(data[workers]["samples"]) == 3


def test_a_broken_registry_is_an_error_sample_and_the_queues_are_still_exported(
    alias: Any,
) -> None:
    alias.queue("orders").enqueue("t")
    index, _ = registry_keys(alias)
    alias.client.set(index, "a string where the index zset belongs")
    response = scrape()
    assert response.status_code == 200
    found = samples(response.content.decode())
    assert value(found, "redislock_backend_up", kind="queues", alias="default") == 1
    assert (
        value(found, "redislock_queue_tasks", alias="default", queue="orders", state="ready") == 1
    )
    labels = {"kind": "workers", "alias": "default", "queue": "", "reason": "wrongtype"}
    assert value(found, "redislock_scrape_error", **labels) == 1
    assert not [name for (name, _) in found if name == "redislock_workers"]
