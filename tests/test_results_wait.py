"""Waiting for results on real servers: every waiter wakes on the store, blocks stay below the
socket timeout, cancellation leaves nothing behind, what no worker stored is seen at the next
read, a server without the scripts, and what a drain costs with and without results.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from django_redislock import queues
from django_redislock.exceptions import ResultTimeout, TaskFailed
from django_redislock.queue.results import ResultStatus, record_keys

from . import result_tasks as rt
from .conftest import RedisTarget
from .test_results import drain, eventually, results_queue, use

# the worker closes stale database connections between tasks, as around a request
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(params=["single", "cluster"])
def real(request: pytest.FixtureRequest) -> Iterator[RedisTarget]:
    yield from use(request.getfixturevalue(f"{request.param}_target"))


@pytest.fixture
def short_blocks(redis_target: RedisTarget) -> Iterator[RedisTarget]:
    """The contract targets with SOCKET_TIMEOUT 1 s: a waiter's blocks last 0.5 s."""
    yield from use(redis_target, SOCKET_TIMEOUT=1.0)


def test_a_task_dead_lettered_without_a_store_is_failed_at_the_next_read(
    short_blocks: RedisTarget,
) -> None:
    """What workers that keep dying leave: a dead letter and its error, no stored outcome."""
    handle = rt.add.delay(1, 2)
    queue = results_queue()
    [claimed] = queue.pop()
    caught: list[BaseException] = []

    def wait() -> None:
        try:
            handle.result(timeout=20)
        except BaseException as exc:
            caught.append(exc)

    waiter = threading.Thread(target=wait)
    waiter.start()
    time.sleep(0.2)
    started = time.monotonic()
    assert queue.retry(claimed, error="lease expired during attempt 5", max_attempts=1) == "dead"
    waiter.join(timeout=15)
    assert time.monotonic() - started < 5.0
    assert isinstance(caught[0], TaskFailed)
    assert caught[0].error == "lease expired during attempt 5"


def test_a_server_without_the_scripts_still_restarts_the_record(real: RedisTarget) -> None:
    """After a SCRIPT FLUSH (or a new master): neither script, or only the enqueue's, loaded."""
    raw: Any = real.raw
    servers = (
        [raw.get_redis_connection(n) for n in raw.get_primaries()]
        if real.kind == "cluster"
        else [raw]
    )
    enqueue = queues["default"].script("queue_enqueue")  # type: ignore[attr-defined]
    for reloaded in ([], [enqueue]):
        rt.add.enqueue(args=[1, 1], id="flushed")
        drain()
        assert rt.add.result_of("flushed").result(timeout=1) == 2
        for server in servers:
            server.script_flush()
        for script in reloaded:  # the enqueue runs, the mark is NOSCRIPT: it is sent alone
            enqueue.registered_client.script_load(script.script)
        again = rt.add.enqueue(args=[2, 2], id="flushed")
        assert again.queued is True and again.status is ResultStatus.READY
        drain()
        assert again.result(timeout=1) == 4


# -- waiting without polling (real servers) --------------------------------------------------


def test_every_waiter_wakes_when_the_result_is_stored(real: RedisTarget) -> None:
    handle = rt.add.delay(20, 22)
    got: list[Any] = []
    waiters = [
        threading.Thread(target=lambda: got.append(handle.result(timeout=30))) for _ in range(3)
    ]
    for waiter in waiters:
        waiter.start()
    eventually(lambda: blocked_clients(real) == 3, 10, "three blocked waiters")
    started = time.monotonic()
    drain()
    for waiter in waiters:
        waiter.join(timeout=10)
    assert got == [42, 42, 42]
    # woken by the store, not by their next read (each blocks for up to 4.5 s)
    assert time.monotonic() - started < 3.0


def test_a_wait_longer_than_the_socket_timeout_times_out_cleanly(real: RedisTarget) -> None:
    for _ in use(real, SOCKET_TIMEOUT=1.0):
        handle = rt.add.delay(1, 1)  # nobody runs it
        started = time.monotonic()
        with pytest.raises(ResultTimeout, match="still READY"):
            handle.result(timeout=2.5)
        assert 2.4 < time.monotonic() - started < 6.0
        drain()
        assert handle.result(timeout=1) == 2  # the connection pool is fine


def test_the_async_twin_wakes_on_the_store(real: RedisTarget) -> None:
    handle = rt.add.delay(2, 2)

    async def wait() -> Any:
        return await handle.result_async(timeout=30)

    runner = threading.Timer(0.3, drain)
    runner.start()
    try:
        assert asyncio.run(wait()) == 4
    finally:
        runner.join()
    assert asyncio.run(handle.status_async()) is ResultStatus.SUCCESSFUL


def blocked_clients(target: RedisTarget) -> int:
    client: Any = target.raw
    if target.kind == "cluster":
        infos = client.info("clients", target_nodes=client.ALL_NODES)
        return sum(int(info["blocked_clients"]) for info in infos.values())
    return int(client.info("clients")["blocked_clients"])


def test_cancelling_an_async_wait_leaves_nothing_behind(real: RedisTarget) -> None:
    handle = rt.add.delay(5, 5)
    done_key = record_keys(results_queue(), handle)[1]

    async def cancel_a_wait() -> None:
        waiting = asyncio.ensure_future(handle.result_async(timeout=60))
        deadline = time.monotonic() + 10
        while blocked_clients(real) != 1:  # bounded: the waiter reads, then blocks
            assert time.monotonic() < deadline, "the waiter never blocked"
            await asyncio.sleep(0.02)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        # the same loop's client is still usable
        assert await handle.status_async() is ResultStatus.READY

    asyncio.run(cancel_a_wait())
    eventually(lambda: blocked_clients(real) == 0, 5, "the cancelled BLMOVE to end")
    assert real.raw.exists(done_key) == 0
    drain()
    assert real.raw.llen(done_key) == 1  # one token, rotated by waiters, never taken
    assert handle.result(timeout=1) == 10
    assert real.raw.llen(done_key) == 1


# -- cost --------------------------------------------------------------------------------------


#: The commands that run a script (an ``EVAL`` is one as much as an ``EVALSHA``).
SCRIPTS = ("evalsha", "eval")


def test_a_worker_sends_one_more_script_call_per_stored_task_only(
    single_target: RedisTarget,
) -> None:
    raw = single_target.raw

    def script_calls_to_drain(fn: Any, count: int) -> int:
        for i in range(count):
            fn.delay(str(i))
        raw.config_resetstat()
        drain()
        stats = raw.info("commandstats")
        return sum(int(stats.get(f"cmdstat_{name}", {"calls": 0})["calls"]) for name in SCRIPTS)

    for _ in use(single_target):
        for fn in (rt.forgetful, rt.keep):  # load every script first
            script_calls_to_drain(fn, 1)
        plain = script_calls_to_drain(rt.forgetful, 50)
        stored = script_calls_to_drain(rt.keep, 50)
    # the claim of all 50, the claim that acks them and finds none, the workers registry's
    # first heartbeat and leave, and in the outcome flush (one call-layer batch, one round
    # trip) the rates, the task functions' tally (admin's per-function table, fnstats) and
    # the run log's successes (one history_add for the queue's 50, queue/runlog.py)
    assert plain == 7
    assert stored == plain + 50  # plus the store of each
