"""@task functions the queue tests run (found by drain_queue's autodiscovery of ``tasks``)."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from typing import Any

from django_redislock import queues, task

#: Where tasks record their runs (a list on the default queue alias's server).
RUNS_KEY = "test:{runs}:list"
#: Runs in this process, for in-process tests.
CALLS: list[Any] = []


def record(entry: str) -> None:
    CALLS.append(entry)
    queues["default"].client.rpush(RUNS_KEY, entry)  # type: ignore[attr-defined]


def runs() -> list[str]:
    """Every recorded run, in order."""
    client = queues["default"].client  # type: ignore[attr-defined]
    return [item.decode() for item in client.lrange(RUNS_KEY, 0, -1)]


@task(queue="tests")
def remember(tag: str, **extra: Any) -> str:
    record(tag)
    return tag


@task(queue="tests", max_attempts=2)
def always_fails(tag: str) -> None:
    record(f"fail:{tag}")
    raise ValueError(f"always fails: {tag}")


@task(queue="tests", max_attempts=3, retry_backoff=100.0, retry_backoff_max=100.0)
def fails_slowly(tag: str) -> None:
    """Fails; retried after its own 100 s backoff, not the alias's."""
    record(f"fail-slowly:{tag}")
    raise ValueError(f"fails slowly: {tag}")


@task(queue="tests", unique=True)
def unique_job(a: int, b: int = 0) -> int:
    record(f"unique:{a}:{b}")
    return a + b


@task(queue="slow")
def slow(tag: str, seconds: float) -> None:
    record(f"start:{tag}:{os.getpid()}")
    time.sleep(seconds)
    record(f"end:{tag}")


#: What ends a run of ``held`` (in-process workers only): set by the test when it is done.
RELEASE = threading.Event()


@task(queue="slow")
def held(tag: str) -> None:
    """Runs until the test sets RELEASE (at most 120 s): busy for as long as a test looks."""
    record(f"start:{tag}:{os.getpid()}")
    RELEASE.wait(120)
    record(f"end:{tag}")


@task(queue="tests")
async def remember_async(tag: str) -> str:
    await asyncio.sleep(0)
    record(f"async:{tag}")
    return tag


# -- claims: tasks the claim/failure tests run in drain_queue processes ------------------


@task(queue="claims")
def step(tag: str, seconds: float = 0) -> None:
    record(f"run:{tag}:{os.getpid()}")
    time.sleep(seconds)
    record(f"done:{tag}")


#: Where a test lets a run of ``step_until`` end (a key per tag, on the runs' slot).
GO_KEY = "test:{runs}:go:%s"


def let_go(tag: str) -> None:
    """End the runs of ``step_until(tag)``, in any process: an event across processes."""
    queues["default"].client.set(GO_KEY % tag, 1)  # type: ignore[attr-defined]


@task(queue="claims")
def step_until(tag: str, limit: float = 60) -> None:
    """Runs until the test calls ``let_go(tag)`` (at most ``limit`` s), then records it."""
    record(f"run:{tag}:{os.getpid()}")
    client = queues["default"].client  # type: ignore[attr-defined]
    end = time.monotonic() + limit
    while not client.exists(GO_KEY % tag) and time.monotonic() < end:
        time.sleep(0.02)
    record(f"done:{tag}")


@task(queue="claims")
def kills_worker(tag: str) -> None:
    """Ends its worker at once, as an OOM kill would (no cleanup, no ack)."""
    record(f"kill:{tag}:{os.getpid()}")
    os._exit(137)


@task(queue="claims", max_attempts=1)
def kills_worker_once(tag: str) -> None:
    record(f"kill:{tag}:{os.getpid()}")
    os._exit(137)


@task(queue="claims", max_attempts=3)
def kills_worker_thrice(tag: str) -> None:
    record(f"kill:{tag}:{os.getpid()}")
    os._exit(137)


@task(queue="limited", rate_limit="20/s")
def rate_limited(tag: str) -> None:
    """Runs at most 20 times a second across all workers (tests/test_flow_process.py)."""
    record(tag)


@task(queue="limited15", rate_limit="15/s")
def rate_limited_15(tag: str) -> None:
    """15/s: one run every 66.7 ms, one at once (no burst to absorb a late wake-up)."""
    record(tag)


@task(queue="tests", priority=7)
def urgent(tag: str) -> str:
    """Queued at priority level 7 unless a call says otherwise (tests/test_priority_*.py)."""
    record(f"urgent:{tag}")
    return tag


# -- pools and time limits: tasks of the pool tests (tests/test_pools*.py) -------------------


def stamp(entry: str) -> None:
    """Record ``entry`` with this process's pid and the wall time (for overlap checks)."""
    record(f"{entry}:{os.getpid()}:{time.time():.4f}")


@task(queue="pool")
def wait_io(tag: str, seconds: float) -> str:
    stamp(f"start:{tag}")
    time.sleep(seconds)
    stamp(f"end:{tag}")
    return tag


@task(queue="pool")
async def wait_io_async(tag: str, seconds: float) -> str:
    stamp(f"start:{tag}")
    await asyncio.sleep(seconds)
    stamp(f"end:{tag}")
    return tag


@task(queue="pool", max_attempts=2, retry_backoff=0.01, retry_backoff_max=0.01)
def fails_once(tag: str) -> str:
    """Fails its first run, succeeds on the retry (runs counted in Redis, across processes)."""
    client = queues["default"].client  # type: ignore[attr-defined]
    if client.incr(f"test:{{runs}}:fails-once:{tag}") == 1:
        stamp(f"fail:{tag}")
        raise ValueError(f"first run of {tag} fails")
    stamp(f"ok:{tag}")
    return tag


@task(queue="pool", max_attempts=1)
def fails_always(tag: str) -> None:
    stamp(f"fail:{tag}")
    raise ValueError(f"always fails: {tag}")


@task(queue="pool", time_limit=1.0, max_attempts=1)
def spins(tag: str) -> None:
    """Python code that never ends by itself: any pool's hard limit ends it."""
    stamp(f"start:{tag}")
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        stamp(f"cleanup:{tag}")


@task(queue="pool", time_limit=1.0, max_attempts=1)
def sleeps_long(tag: str) -> None:
    """One blocking call: SIGALRM (solo) interrupts it; a thread's limit cannot."""
    stamp(f"start:{tag}")
    time.sleep(20)
    stamp(f"end:{tag}")


@task(queue="pool", time_limit=1.0, max_attempts=1)
async def sleeps_long_async(tag: str) -> None:
    stamp(f"start:{tag}")
    await asyncio.sleep(20)
    stamp(f"end:{tag}")


@task(queue="pool", soft_time_limit=0.5, time_limit=5.0)
def cleans_up(tag: str) -> str:
    """Catches its soft limit and returns early."""
    from django_redislock.exceptions import SoftTimeLimitExceeded

    stamp(f"start:{tag}")
    try:
        for _ in range(1000):
            time.sleep(0.01)
    except SoftTimeLimitExceeded:
        stamp(f"soft:{tag}")
        return "cleaned up"
    stamp(f"end:{tag}")
    return "not interrupted"


#: a lease of its own, renewed every second by its worker: 3 s leaves two renewals of slack
#: on a loaded machine (with 1 s, a keeper thread starved for 0.7 s let another worker in)
@task(queue="pool", time_limit=1.0, max_attempts=2, lease=3.0)
def hangs_in_c(tag: str, seconds: float = 8.0) -> None:
    """A call that a thread's limit cannot interrupt (it ends by itself after ``seconds``)."""
    stamp(f"start:{tag}")
    time.sleep(seconds)
    stamp(f"end:{tag}")


@task(queue="pool", time_limit=1.0, lease=1.0)
def ignores_alarm(tag: str) -> None:
    """Blocks SIGALRM, then sleeps: a solo worker's limit cannot interrupt it."""
    block_alarm_and_sleep(tag)


@task(queue="pool", time_limit=1.0)
def ignores_alarm_on_the_claim_lease(tag: str) -> None:
    """The same without settings of its own: its start is recorded only by the keeper."""
    block_alarm_and_sleep(tag)


def block_alarm_and_sleep(tag: str) -> None:
    import signal

    stamp(f"start:{tag}")
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
    time.sleep(15)
    stamp(f"end:{tag}")
