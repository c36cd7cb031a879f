"""The metrics endpoint (parsed by prometheus_client), its JSON twin, access, --check."""

from __future__ import annotations

import contextlib
import io
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client, override_settings
from prometheus_client.parser import text_string_to_metric_families

from django_redislock import locks, queues
from django_redislock.exceptions import ConfigurationError, LockLost, MissingDependency
from django_redislock.metrics import render_text, timings
from django_redislock.metrics.families import Family
from django_redislock.queue import Queue
from django_redislock.queue.worker import Worker, counters_key

from .conftest import RedisTarget
from .servers import RedisProcess
from .testapp import tasks

TOKEN = "s3cret-metrics-token"
pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.urls("tests.metrics_urls"),
]


@pytest.fixture
def target(redis_target: RedisTarget) -> Iterator[RedisTarget]:
    options = {"RETRY_BACKOFF": 0.01, "RETRY_JITTER": False, "MAX_ATTEMPTS": 1}
    params = {**redis_target.params(**options), "KEY_PREFIX": "test"}
    lock_params = {**redis_target.params(), "KEY_PREFIX": "test"}
    tasks.CALLS.clear()
    timings.reset()
    with override_settings(
        REDISLOCK_QUEUES={"default": params},
        REDISLOCK_LOCKS={"default": lock_params},
        REDISLOCK_METRICS_TOKEN=[TOKEN, "older-token"],
    ):
        yield redis_target


def scrape(client: Client | None = None, path: str = "/redislock/metrics", **headers: Any) -> Any:
    client = client or Client()
    if not headers:
        headers = {"HTTP_AUTHORIZATION": f"Bearer {TOKEN}"}
    return client.get(path, **headers)


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample by (name, sorted labels), parsed by prometheus_client."""
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def value(found: dict[Any, float], name: str, **labels: str) -> float:
    return found[(name, tuple(sorted(labels.items())))]


def fill(q: Queue) -> None:
    """3 ready (one old), 2 delayed, 1 in flight, 1 dead; counters 2 ok, 1 retried, 1 dead."""
    tasks.remember.delay("a")
    tasks.remember.delay("b")
    tasks.always_fails.enqueue(("x",))  # max_attempts=2: retried once, then dead
    for _ in range(100):
        Worker([q], burst=True).run()
        if q.stats()["dead"]:
            break
        time.sleep(0.01)
    q.enqueue("old", {"n": 1})
    time.sleep(0.05)
    q.enqueue_many([("r1", 1), ("r2", 2)])
    q.enqueue_many([("d1", 1), ("d2", 2)], delay=600)
    q.enqueue("claimed")
    # claim everything ready, give all but one back in their places
    claimed = q.pop(10, lease=120)
    keep = [t for t in claimed if t.id == "claimed"]
    q.release([t for t in claimed if t.id != "claimed"])
    assert len(keep) == 1


def test_scrape_parses_and_counts(target: RedisTarget) -> None:
    q: Queue = queues["default"].queue("tests")
    fill(q)
    lock = locks["default"].lock("report", ttl=30)
    assert lock.acquire()
    response = scrape()
    lock.release()
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain; version=0.0.4")
    assert "no-cache" in response["Cache-Control"] or "max-age=0" in response["Cache-Control"]
    found = samples(response.content.decode())
    labels = {"alias": "default", "queue": "tests"}
    assert value(found, "redislock_queue_tasks", state="ready", **labels) == 3
    assert value(found, "redislock_queue_tasks", state="delayed", **labels) == 2
    assert value(found, "redislock_queue_tasks", state="in_flight", **labels) == 1
    assert value(found, "redislock_queue_tasks", state="dead", **labels) == 1
    assert value(found, "redislock_queue_oldest_ready_age_seconds", **labels) >= 0.04
    assert 100 < value(found, "redislock_queue_next_lease_deadline_seconds", **labels) <= 120
    assert value(found, "redislock_queue_expired_leases", **labels) == 0
    processed = "redislock_queue_tasks_processed_total"
    assert value(found, processed, outcome="succeeded", **labels) == 2
    assert value(found, processed, outcome="dead", **labels) == 1
    assert value(found, processed, outcome="retried", **labels) == 1
    assert value(found, "redislock_queue_tasks_failed_total", **labels) == 2
    assert value(found, "redislock_locks_held", alias="default") == 1
    assert value(found, "redislock_backend_up", kind="queues", alias="default") == 1
    assert value(found, "redislock_lock_wait_seconds_count", alias="default") == 1
    # the JSON twin carries the same numbers
    data = scrape(path="/redislock/metrics.json").json()
    rows = data["redislock_queue_tasks"]["samples"]
    assert {
        "name": "redislock_queue_tasks",
        "labels": {**labels, "state": "ready"},
        "value": 3,
    } in (rows)
    assert data["redislock_locks_held"]["type"] == "gauge"


def test_counters_are_one_pipeline_per_second_not_per_task(target: RedisTarget) -> None:
    for i in range(30):
        tasks.remember.delay(f"t{i}")
    q: Queue = queues["default"].queue("tests")
    Worker([q], burst=True, batch=7).run()
    assert target.raw.hgetall(counters_key(q)) == {b"succeeded": b"30"}


def test_scrape_cost_does_not_grow_with_queue_size(single_target: RedisTarget) -> None:
    """Counts, not scans: no SCAN/KEYS and the same commands for 10 or 5,000 tasks."""
    params = {**single_target.params(), "KEY_PREFIX": "test"}
    raw = single_target.raw
    with override_settings(REDISLOCK_QUEUES={"default": params}, REDISLOCK_METRICS_TOKEN=TOKEN):
        q: Queue = queues["default"].queue("big")
        q.enqueue_many([(f"t{i}", i) for i in range(10)])
        scrape()
        raw.config_resetstat()
        scrape()
        small = raw.info("commandstats")
        q.enqueue_many([(f"u{i}", i) for i in range(5000)])
        raw.config_resetstat()
        scrape()
        big = raw.info("commandstats")
    assert not any(name in big for name in ("cmdstat_scan", "cmdstat_keys"))
    assert calls_per_scrape(small) == calls_per_scrape(big)


#: What a new connection sends before its first command: whether the scrape's pools open one
#: depends on what ran before (the order of the tests), not on the queue's size.
HANDSHAKE = ("cmdstat_hello", "cmdstat_ping", "cmdstat_client|setinfo", "cmdstat_select")


def calls_per_scrape(stats: dict[str, Any]) -> dict[str, int]:
    """Calls per command of one scrape, without the handshakes of new connections."""
    return {k: v["calls"] for k, v in stats.items() if k not in HANDSHAKE}


def test_access_needs_a_token_or_staff(target: RedisTarget) -> None:
    anonymous = Client()
    assert anonymous.get("/redislock/metrics").status_code == 403
    wrong = anonymous.get("/redislock/metrics", HTTP_AUTHORIZATION="Bearer nope")
    assert wrong.status_code == 401 and "Bearer" in wrong["WWW-Authenticate"]
    assert scrape(HTTP_AUTHORIZATION="Bearer older-token").status_code == 200
    assert anonymous.post(
        "/redislock/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}"
    ).status_code == (405)
    user = User.objects.create_user("ops", password="pw")
    client = Client()
    client.force_login(user)
    assert client.get("/redislock/metrics.json").status_code == 403
    user.is_staff = True
    user.save()
    assert client.get("/redislock/metrics.json").status_code == 200
    with override_settings(REDISLOCK_METRICS_TOKEN=None):
        # no token configured: a bearer header never gets in, staff still do
        assert scrape().status_code == 401
        assert client.get("/redislock/metrics").status_code == 200


def test_unreachable_alias_is_reported_down() -> None:
    down = {"default": {"LOCATION": "redis://127.0.0.1:1/0", "OPTIONS": {"SOCKET_TIMEOUT": 0.5}}}
    with override_settings(
        REDISLOCK_QUEUES=down, REDISLOCK_LOCKS=down, REDISLOCK_METRICS_TOKEN=TOKEN
    ):
        response = scrape()
    assert response.status_code == 200
    found = samples(response.content.decode())
    assert value(found, "redislock_backend_up", kind="queues", alias="default") == 0
    assert value(found, "redislock_backend_up", kind="locks", alias="default") == 0


def test_lock_wait_and_hold_histograms(target: RedisTarget) -> None:
    # Warm the connection to the lock's node first: on a loaded machine a cluster client's
    # first connection alone can take longer than the 0.1 s bucket this test checks.
    warm = locks["default"].lock("h", ttl=1, watchdog=False)
    assert not warm.locked()
    first = locks["default"].lock("h", ttl=1.0, watchdog=False)
    assert first.acquire()
    second = locks["default"].lock("h", ttl=5)
    assert second.acquire(timeout=5)  # waits for the first hold to expire (~1 s)
    time.sleep(0.02)
    second.release()
    found = samples(scrape().content.decode())
    assert value(found, "redislock_lock_wait_seconds_count", alias="default") == 2
    # the first acquire (no wait) and the second (~1 s) fall on either side of 0.5 s, each
    # with 0.5 s to spare for a stall of a loaded machine
    assert value(found, "redislock_lock_wait_seconds_bucket", alias="default", le="0.5") == 1
    assert value(found, "redislock_lock_wait_seconds_sum", alias="default") >= 0.5
    assert value(found, "redislock_lock_hold_seconds_count", alias="default") == 1
    assert value(found, "redislock_lock_hold_seconds_bucket", alias="default", le="0.01") == 0
    assert value(found, "redislock_lock_hold_seconds_bucket", alias="default", le="+Inf") == 1


def test_label_values_are_escaped() -> None:
    family = Family("redislock_x", "gauge", "help with \\ and\nnewline")
    family.add(1.5, {"queue": 'a"b\\c\nd'})
    [parsed] = text_string_to_metric_families(render_text([family]))
    assert parsed.samples[0].labels == {"queue": 'a"b\\c\nd'}
    assert parsed.documentation == "help with \\ and\nnewline"


# -- queue_status --check ----------------------------------------------------------------


def status(*args: str) -> str:
    out = io.StringIO()
    call_command("queue_status", *args, stdout=out)
    return out.getvalue()


def test_queue_status_check_exit_codes(target: RedisTarget) -> None:
    q: Queue = queues["default"].queue("probe")
    q.enqueue("later", delay=600)
    # every known queue is checked (the @task queues of the test app are empty)
    assert "none older than 0s" in status("--check", "--max-age", "0")
    assert "OK: 1 queue(s)" in status("--check", "--max-age", "0", "--queue", "probe")
    q.enqueue("now")
    time.sleep(0.05)
    assert "OK" in status("--check", "--max-age", "30")
    with pytest.raises(
        CommandError, match=r"older than 0.01s: default/probe \(\d+\.\ds, 1 ready\)"
    ):
        status("--check", "--max-age", "0.01")
    assert "OK: 0 queue(s)" in status("--check", "--max-age", "0.01", "--queue", "other")
    with pytest.raises(CommandError, match="--check needs --max-age"):
        status("--check")


def test_queue_status_check_fails_when_redis_is_down() -> None:
    down = {"default": {"LOCATION": "redis://127.0.0.1:1/0", "OPTIONS": {"SOCKET_TIMEOUT": 0.5}}}
    with override_settings(REDISLOCK_QUEUES=down), pytest.raises(CommandError):
        status("--check", "--max-age", "60")


def test_lost_holds_are_forgotten(target: RedisTarget) -> None:
    lock = locks["default"].lock("lost", ttl=0.05, watchdog=False)
    assert lock.acquire()
    assert len(timings._open) == 1
    time.sleep(0.1)
    with pytest.raises(LockLost):
        lock.release()
    assert timings._open == {} and "default" not in timings.hold


# -- a scrape that never fails -------------------------------------------------------------


@pytest.fixture
def private_server(tmp_path: Path) -> Iterator[RedisProcess]:
    """A redis-server of this test alone, to stop, keep busy or break at will."""
    server = RedisProcess(tmp_path / "private", extra=["--busy-reply-threshold", "50"]).start()
    try:
        yield server
    finally:
        if server.process is not None:
            os.kill(server.process.pid, signal.SIGCONT)  # a stopped server cannot terminate
        server.stop()


def two_aliases(good: RedisTarget, bad_url: str, **bad_options: Any) -> Any:
    """Queue and lock aliases "good" (working) and "bad" (on ``bad_url``)."""
    good_params = {**good.params(), "KEY_PREFIX": "test"}
    bad = {"LOCATION": bad_url, "KEY_PREFIX": "test", "OPTIONS": bad_options}
    both = {"good": good_params, "bad": bad}
    return override_settings(
        REDISLOCK_QUEUES=both, REDISLOCK_LOCKS=both, REDISLOCK_METRICS_TOKEN=TOKEN
    )


def test_a_key_of_the_wrong_type_breaks_only_its_queue(target: RedisTarget) -> None:
    good: Queue = queues["default"].queue("fine")
    good.enqueue("x")
    broken: Queue = queues["default"].queue("broken")
    broken.enqueue("y")
    client: Any = queues["default"].client  # type: ignore[attr-defined]
    client.delete(broken.keys[0])
    client.sadd(broken.keys[0], "a set where the pending zset belongs")
    response = scrape()
    assert response.status_code == 200
    found = samples(response.content.decode())
    assert value(found, "redislock_backend_up", kind="queues", alias="default") == 1
    assert value(found, "redislock_queue_tasks", alias="default", queue="fine", state="ready") == 1
    error = {"kind": "queues", "alias": "default", "queue": "broken", "reason": "wrongtype"}
    assert value(found, "redislock_scrape_error", **error) == 1
    assert not any(
        labels and ("queue", "broken") in labels
        for (name, labels) in found
        if name == "redislock_queue_tasks"
    )
    json_reply = scrape(path="/redislock/metrics.json").json()
    assert json_reply["redislock_scrape_error"]["samples"][0]["labels"]["queue"] == "broken"


def test_a_busy_redis_is_reported_down_and_the_others_are_exported(
    single_target: RedisTarget, private_server: RedisProcess
) -> None:
    runner = private_server.client(socket_timeout=30)

    def spin() -> None:
        with contextlib.suppress(redis.RedisError):  # ended by SCRIPT KILL
            runner.eval("local n = 0 while true do n = n + 1 end", 0)

    busy = threading.Thread(target=spin, daemon=True)
    busy.start()
    try:
        probe = private_server.client()
        for _ in range(200):  # until the script is past the busy-reply threshold
            try:
                probe.ping()
            except redis.ResponseError as exc:
                assert str(exc).startswith("BUSY")
                break
            time.sleep(0.02)
        else:
            pytest.fail("the server never answered BUSY")
        with two_aliases(single_target, private_server.url):
            queues["good"].queue("q").enqueue("t")
            response = scrape()
    finally:
        private_server.client().script_kill()
        busy.join(5)
    assert response.status_code == 200
    found = samples(response.content.decode())
    for kind in ("queues", "locks"):
        assert value(found, "redislock_backend_up", kind=kind, alias="good") == 1
        assert value(found, "redislock_backend_up", kind=kind, alias="bad") == 0
        labels = {"kind": kind, "alias": "bad", "queue": "", "reason": "busy"}
        assert value(found, "redislock_scrape_error", **labels) == 1
    assert value(found, "redislock_queue_tasks", alias="good", queue="q", state="ready") == 1


def test_a_hung_redis_costs_the_scrape_its_deadline_only(
    single_target: RedisTarget, private_server: RedisProcess
) -> None:
    assert private_server.process is not None
    os.kill(private_server.process.pid, signal.SIGSTOP)  # accepts connections, never answers
    # a socket timeout far past the scrape's deadline: a scrape that waited on the hung
    # server would take 30 s, one that kept its deadline takes about a second even when
    # the machine is busy (the bound below is the failure's, not a latency target)
    with two_aliases(single_target, private_server.url, SOCKET_TIMEOUT=30):
        queues["good"].queue("q").enqueue("t")
        for attempt in range(2):  # the second scrape finds the first one's read still waiting
            started = time.monotonic()
            response = scrape()
            took = time.monotonic() - started
            assert response.status_code == 200
            assert took < 10.0, f"scrape {attempt} took {took:.2f} s"
            found = samples(response.content.decode())
            for kind in ("queues", "locks"):
                assert value(found, "redislock_backend_up", kind=kind, alias="good") == 1
                assert value(found, "redislock_backend_up", kind=kind, alias="bad") == 0
                labels = {"kind": kind, "alias": "bad", "queue": "", "reason": "timeout"}
                assert value(found, "redislock_scrape_error", **labels) == 1
            assert (
                value(found, "redislock_queue_tasks", alias="good", queue="q", state="ready") == 1
            )


def test_the_deadline_setting_is_checked(target: RedisTarget) -> None:
    with (
        override_settings(REDISLOCK_METRICS_TIMEOUT="soon"),
        pytest.raises(ConfigurationError, match="REDISLOCK_METRICS_TIMEOUT"),
    ):
        scrape()


# -- without prometheus_client ------------------------------------------------------------


@pytest.fixture
def no_prometheus_client(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make ``import prometheus_client`` fail, as on a project without the extra."""
    monkeypatch.setitem(sys.modules, "prometheus_client", None)
    monkeypatch.delitem(sys.modules, "django_redislock.metrics.prometheus", raising=False)


@pytest.mark.usefixtures("no_prometheus_client")
def test_without_prometheus_client_the_text_endpoint_names_the_extra(target: RedisTarget) -> None:
    queues["default"].queue("tests").enqueue("t")
    assert Client().get("/redislock/metrics").status_code == 403  # access is checked first
    response = scrape()
    assert response.status_code == 501
    assert "django-redislock[prometheus]" in response.content.decode()
    data = scrape(path="/redislock/metrics.json").json()  # the JSON twin needs nothing more
    labels = {"alias": "default", "queue": "tests", "state": "ready"}
    assert {"name": "redislock_queue_tasks", "labels": labels, "value": 1} in (
        data["redislock_queue_tasks"]["samples"]
    )
    with pytest.raises(MissingDependency, match=r"django-redislock\[prometheus\]"):
        render_text([])


def test_the_check_warns_when_the_urls_are_mounted_without_prometheus_client(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from django_redislock.checks import check_metrics

    assert check_metrics() == []  # installed (tests.metrics_urls mounts the URLs)
    monkeypatch.setitem(sys.modules, "prometheus_client", None)
    assert [message.id for message in check_metrics()] == ["redislock.W004"]
    assert "django-redislock[prometheus]" in (check_metrics()[0].hint or "")
    with override_settings(ROOT_URLCONF="tests.lock_urls"):  # no metrics URLs: nothing to say
        assert check_metrics() == []


def test_a_family_with_mixed_label_names_is_refused() -> None:
    family = Family("redislock_x", "gauge", "help")
    family.add(1, {"alias": "a"})
    family.add(2, {"queue": "q"})
    with pytest.raises(ValueError, match="redislock_x"):
        render_text([family])
