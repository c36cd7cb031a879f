"""Semaphores and fair locks in the metrics (issue 30): in use, held and waiting per alias and
kind, read from the coordination index; acquire outcomes per kind counted in this process.
Parsed by prometheus_client, as in tests/test_metrics.py."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from django.test import override_settings

from django_redislock import locks
from django_redislock.metrics import timings
from django_redislock.metrics.coordination import acquisitions

from .conftest import RedisTarget
from .processes import wait_for
from .test_metrics import TOKEN, samples, scrape, value

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.urls("tests.metrics_urls"),
]


@pytest.fixture
def target(redis_target: RedisTarget) -> Iterator[RedisTarget]:
    params = {**redis_target.params(), "KEY_PREFIX": "test"}
    timings.reset()
    acquisitions.reset()
    with override_settings(
        REDISLOCK_QUEUES={},
        REDISLOCK_LOCKS={"default": params},
        REDISLOCK_METRICS_TOKEN=TOKEN,
    ):
        yield redis_target


def found_now() -> dict[Any, float]:
    response = scrape()
    assert response.status_code == 200
    return samples(response.content.decode())


def gauges(found: dict[Any, float], kind: str) -> tuple[float, float, float]:
    return tuple(  # type: ignore[return-value]
        value(found, f"redislock_coordination_{name}", alias="default", kind=kind)
        for name in ("in_use", "held", "waiters")
    )


def test_nothing_in_use_is_exported_as_zeros(target: RedisTarget) -> None:
    found = found_now()
    assert value(found, "redislock_backend_up", kind="coordination", alias="default") == 1
    assert gauges(found, "semaphore") == (0, 0, 0)
    assert gauges(found, "fair") == (0, 0, 0)


def test_held_permits_fair_holds_and_waiters(target: RedisTarget) -> None:
    backend = locks["default"]
    sems = [backend.semaphore(f"exports:{n}", permits=2, ttl=30) for n in range(2)]
    permits = [sems[0].acquire(), sems[0].acquire(), sems[1].acquire()]
    assert all(permits)
    fair = backend.fair_lock("report", ttl=30, wait_lease=30)
    assert fair.acquire()
    other = backend.fair_lock("report", ttl=30, wait_lease=30)
    got: list[Any] = []
    sem_waiter = threading.Thread(target=lambda: got.append(sems[0].acquire(timeout=30)))

    def fair_wait() -> None:
        if other.acquire(timeout=30):
            other.release()

    fair_waiter = threading.Thread(target=fair_wait)
    sem_waiter.start()
    fair_waiter.start()
    try:
        wait_for(lambda: sems[0].waiting() == 1 and fair.waiting() == 1, 60, "two waiters")
        found = found_now()
        assert gauges(found, "semaphore") == (2, 3, 1)
        assert gauges(found, "fair") == (1, 1, 1)
    finally:
        for permit in permits:
            permit.release()  # type: ignore[union-attr]
        fair.release()
        sem_waiter.join(60)
        fair_waiter.join(60)
    assert got and got[0] is not None
    got[0].release()
    found = found_now()
    assert gauges(found, "semaphore") == (0, 0, 0) and gauges(found, "fair") == (0, 0, 0)


def test_latches_and_their_waiters(target: RedisTarget) -> None:
    done = locks["default"].latch("batch", count=1)
    assert done.count() == 1
    results: list[bool] = []
    thread = threading.Thread(target=lambda: results.append(done.wait(30)))
    thread.start()
    try:
        wait_for(lambda: gauges(found_now(), "latch") == (1, 0, 1), 60, "a latch waiter")
    finally:
        done.count_down()
        thread.join(60)
    assert results == [True]
    assert gauges(found_now(), "latch") == (1, 0, 0)  # open, kept for its ttl
    done.delete()
    assert gauges(found_now(), "latch") == (0, 0, 0)


def test_acquisitions_are_counted_by_kind_and_outcome(target: RedisTarget) -> None:
    backend = locks["default"]
    sem = backend.semaphore("s", permits=1, ttl=30)
    permit = sem.acquire()
    assert permit is not None
    assert sem.try_acquire() is None  # busy: a try that does not wait
    assert sem.acquire(timeout=0.05) is None  # timeout: the wait ran out
    fair = backend.fair_lock("f", ttl=30)
    assert fair.acquire()
    assert not backend.fair_lock("f", ttl=30).acquire(blocking=False)
    lock = backend.lock("m", ttl=30)
    assert lock.acquire()
    found = found_now()

    def count(kind: str, outcome: str) -> float:
        labels = {"alias": "default", "kind": kind, "outcome": outcome}
        return value(found, "redislock_lock_acquisitions_total", **labels)

    assert count("semaphore", "granted") == 1
    assert count("semaphore", "busy") == 1
    assert count("semaphore", "timeout") == 1
    assert count("fair", "granted") == 1 and count("fair", "busy") == 1
    assert count("mutex", "granted") == 1
    permit.release()
    fair.release()
    lock.release()


def test_a_redlock_alias_exports_no_coordination_gauges(
    target: RedisTarget, redlock_servers: list[Any]
) -> None:
    quorum = {
        "BACKEND": "django_redislock.backends.redlock.RedlockBackend",
        "LOCATION": [server.url for server in redlock_servers[:3]],
    }
    lock_params = {**target.params(), "KEY_PREFIX": "test"}
    with override_settings(REDISLOCK_LOCKS={"default": lock_params, "quorum": quorum}):
        found = found_now()
    assert ("redislock_coordination_held", (("alias", "quorum"), ("kind", "fair"))) not in found
    assert gauges(found, "fair") == (0, 0, 0)
