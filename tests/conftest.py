"""Fixtures: real Redis servers started by the tests, fakeredis, and the contract pattern.

Session fixtures start, on free loopback ports in temporary directories:

* ``redis_server``: a single server;
* ``redis_cluster``: a 3-master Redis Cluster built by the fixture;
* ``redlock_servers``: 5 independent masters.

``redis_target`` is the contract-test fixture: a test that takes it runs once
against fakeredis, once against the single server and once against the
cluster, with an empty database each time. Use it to build backends::

    def test_something(redis_target):
        backend = redis_target.lock_backend()

The whole session runs with ``REDISLOCK_LOCKS`` / ``REDISLOCK_QUEUES``
pointing at the test server, never at the machine's own Redis.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import redis
from django.test import override_settings

from django_redislock.backends.redis import RedisLockBackend, RedisQueueBackend
from django_redislock.handlers import locks, queues
from django_redislock.locking.calls import _CLEANUPS as LOCK_CLEANUPS
from django_redislock.queue import Queue
from django_redislock.redlock.lock import _CLEANUPS as REDLOCK_CLEANUPS

from .proxied import (  # noqa: F401 - fault-proxy fixtures, see tests/proxied.py
    proxied_cluster,
    proxied_redlock,
    proxied_single,
    proxied_target,
)
from .servers import RedisProcess, start_cluster

KINDS = ("fakeredis", "single", "cluster")

#: The servers this session started, for the closing summary.
TOPOLOGY: dict[str, str] = {}
#: Passed tests per contract kind (the ``[fakeredis]`` / ``[single]`` / ``[cluster]`` ids).
PASSED_BY_KIND: dict[str, int] = {}


def describe(servers: list[RedisProcess]) -> str:
    info = servers[0].client().info("server")
    name = "valkey" if "valkey_version" in info else "redis"
    version = info.get("valkey_version") or info["redis_version"]
    ports = ", ".join(str(server.port) for server in servers)
    return f"{len(servers)} x {name} {version} on 127.0.0.1 port(s) {ports}"


@dataclass
class RedisTarget:
    """Where a contract test runs: a kind, a LOCATION and the OPTIONS to reach it."""

    kind: str
    location: Any
    options: dict[str, Any] = field(default_factory=dict)
    raw: Any = None  # a plain client, for assertions that bypass the app

    def params(self, **options: Any) -> dict[str, Any]:
        return {"LOCATION": self.location, "OPTIONS": {**self.options, **options}}

    def lock_backend(self, alias: str = "test", **options: Any) -> RedisLockBackend:
        return RedisLockBackend(alias, self.params(**options))

    def queue_backend(self, alias: str = "test", **options: Any) -> RedisQueueBackend:
        return RedisQueueBackend(alias, self.params(**options))


async def reached(event: asyncio.Event, task: asyncio.Future[Any], seconds: float = 10.0) -> None:
    """Wait until ``task`` sets ``event``; raise what ended ``task`` first, or after ``seconds``.

    A bare ``await event.wait()`` waits forever when the task fails before setting it (its
    exception is then only logged when the task is collected), and the test hangs until the
    suite's timeout instead of failing with the task's error.
    """
    waiter = asyncio.ensure_future(event.wait())
    await asyncio.wait({waiter, task}, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
    if event.is_set():
        return
    waiter.cancel()
    if task.done():
        task.result()  # raises what ended it
        raise AssertionError("the task ended without setting the event")
    raise AssertionError(f"the task did not set the event within {seconds:g} s")


async def cleanups_finished(seconds: float = 30.0) -> bool:
    """Wait until the library's clean-ups after cancelled calls end; True if all did in time.

    A cancelled asyncio lock call waits for its clean-up (a take-back, a release sent once
    more) a bounded time only; past that the clean-up finishes in the background. A check
    of what the cancellation left in Redis waits for that event first, not for a pause.
    """
    loop = asyncio.get_running_loop()
    pending = {task for task in (*LOCK_CLEANUPS, *REDLOCK_CLEANUPS) if task.get_loop() is loop}
    if pending:
        _, pending = await asyncio.wait(pending, timeout=seconds)
    return not pending


def make_queue(target: RedisTarget, name: str = "jobs", **options: Any) -> Queue:
    """Queue ``name`` of a fresh queue backend on ``target`` (``options``: its OPTIONS)."""
    queue: Queue = target.queue_backend(**options).queue(name)
    return queue


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisProcess]:
    server = RedisProcess(tmp_path_factory.mktemp("redis-single")).start()
    TOPOLOGY["single"] = describe([server])
    yield server
    server.stop()


@pytest.fixture(scope="session")
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[RedisProcess]]:
    nodes = start_cluster(tmp_path_factory.mktemp("redis-cluster"))
    TOPOLOGY["cluster"] = describe(nodes)
    yield nodes
    for node in nodes:
        node.stop()


@pytest.fixture(scope="session")
def redlock_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[RedisProcess]]:
    base = tmp_path_factory.mktemp("redlock")
    servers = [RedisProcess(base / f"master{i}").start() for i in range(5)]
    TOPOLOGY["redlock"] = describe(servers)
    yield servers
    for server in servers:
        server.stop()


@pytest.fixture
def fakeredis_target() -> RedisTarget:
    """A fakeredis server private to this test (fakeredis shares data per URL)."""
    import fakeredis

    url = f"redis://fake-{uuid.uuid4().hex[:12]}:6390/0"
    return RedisTarget(
        "fakeredis", url, {"CLIENT_CLASS": "fakeredis.FakeRedis"}, fakeredis.FakeRedis.from_url(url)
    )


@pytest.fixture
def single_target(redis_server: RedisProcess) -> RedisTarget:
    client = redis_server.client()
    client.flushall()
    return RedisTarget("single", redis_server.url, {}, client)


@pytest.fixture
def cluster_target(redis_cluster: list[RedisProcess]) -> RedisTarget:
    for node in redis_cluster:
        node.client().flushall()
    client = redis.RedisCluster(host="127.0.0.1", port=redis_cluster[0].port)
    return RedisTarget("cluster", redis_cluster[0].url, {"CLUSTER": True}, client)


@pytest.fixture(params=KINDS)
def redis_target(request: pytest.FixtureRequest) -> RedisTarget:
    """The contract fixture: the test runs on fakeredis, a real server and a real cluster."""
    target: RedisTarget = request.getfixturevalue(f"{request.param}_target")
    return target


@pytest.fixture(params=["single", "cluster"])
def real(request: pytest.FixtureRequest) -> Iterator[RedisTarget]:
    """A real server, then a real cluster, as the ``default`` queue alias (``KEY_PREFIX`` test).

    For tests that run workers in other processes (fakeredis cannot be shared between
    processes). A module that needs other settings too defines its own ``real``.
    """
    target: RedisTarget = request.getfixturevalue(f"{request.param}_target")
    params = {**target.params(), "KEY_PREFIX": "test"}
    with override_settings(REDISLOCK_QUEUES={"default": params}):
        yield target


@pytest.fixture(scope="session", autouse=True)
def _settings_point_at_test_server(redis_server: RedisProcess) -> Iterator[None]:
    """Point the default aliases at the session's own server for every test."""
    aliases = {"default": {"LOCATION": redis_server.url, "KEY_PREFIX": "test"}}
    with override_settings(REDISLOCK_LOCKS=aliases, REDISLOCK_QUEUES=aliases):
        yield
    locks.reset()
    queues.reset()


@pytest.fixture(scope="session", autouse=True)
def _sold_out_counts_timer_off() -> None:
    """No timed flush of sold-out refusal counts (tests call ``flush()``): a flush landing
    in a test would show in its command statistics (tests/test_inventory_sold_out*.py)."""
    from django_redislock.inventory import sold_out_counts

    sold_out_counts.TIMER = False


@pytest.fixture(autouse=True)
def _sold_out_counts_discarded() -> Iterator[None]:
    """Each test starts and ends with no sold-out counts pending (none is flushed into a
    later test, or at exit into a stopped server)."""
    from django_redislock.inventory.sold_out_counts import counts

    counts.discard()
    yield
    counts.discard()


@pytest.fixture
def artifacts_dir() -> Path:
    """A folder for screenshots and reports that outlives the test run."""
    path = Path(__file__).resolve().parent.parent / "test-artifacts"
    path.mkdir(exist_ok=True)
    return path


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Order the tests for pytest-xdist's ``--dist worksteal`` (see ``workers()`` in dev.py).

    worksteal hands each test process an equal, contiguous share of this list, and a process
    that runs out takes the second half of the longest remaining share. So each share starts
    with its part of the slow tests (those marked ``slow``: worker processes, faults,
    seconds each), dealt in turn, and ends with quick ones: what is taken at the end is
    quick, and no process is left running one long test while the others wait. The order is
    the same in every test process (xdist requires it); without xdist the slow tests go first.
    """
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    slow = [item for item in items if item.get_closest_marker("slow") is not None]
    quick = [item for item in items if item.get_closest_marker("slow") is None]
    shares: list[list[pytest.Item]] = [slow[i::count] for i in range(count)]
    left = len(items)
    for i, share in enumerate(shares):  # the sizes worksteal's first split gives each process
        size = left // (count - i)
        left -= size
        need = max(0, size - len(share))
        share.extend(quick[:need])
        del quick[:need]
    shares[-1] += quick
    items[:] = [item for share in shares for item in share]


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.when == "call" and report.passed:
        for kind in KINDS:
            if f"[{kind}" in report.nodeid or f"-{kind}]" in report.nodeid:
                PASSED_BY_KIND[kind] = PASSED_BY_KIND.get(kind, 0) + 1


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Say which real servers the run used and how many contract tests passed on each kind."""
    terminalreporter.section("redis servers started by this run")
    for name, text in TOPOLOGY.items():
        terminalreporter.write_line(f"{name}: {text}")
    counts = ", ".join(f"{kind}: {PASSED_BY_KIND.get(kind, 0)}" for kind in KINDS)
    terminalreporter.write_line(f"contract tests passed per kind: {counts}")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail the run if any server started under this session's temp dir is still running."""
    import psutil

    factory = getattr(session.config, "_tmp_path_factory", None)
    if factory is None or session.config.option.collectonly:
        return
    base = str(factory.getbasetemp())
    stray = []
    for proc in psutil.process_iter(["name", "cmdline", "cwd"]):
        with contextlib.suppress(psutil.Error):
            text = " ".join(proc.info["cmdline"] or []) + " " + (proc.info["cwd"] or "")
            if proc.info["name"] in ("redis-server", "valkey-server") and base in text:
                stray.append(proc)
    if stray:
        for proc in stray:
            with contextlib.suppress(psutil.Error):
                proc.kill()
        print(f"\nERROR: {len(stray)} redis-server process(es) outlived the tests: {stray}")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
