"""Sold-out refusals are counted by each process and reach the bucket's meta hash at a flush.

Issue 27 item 5: the admin's refusals lacked sold out (locally and in Redis). The take's
sold-out answer stays one read at the server and the local flag 0 calls
(tests/test_inventory_sold_out.py, tests/test_inventory_sold_out_memory.py): the client
counts them and flushes. Tests call ``flush()`` (the conftest turns the timer off), except
the one test of the timer, which waits for the counts to arrive.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import subprocess
import sys
import time
from typing import Any

import pytest

from django_redislock.exceptions import ConnectionFailed
from django_redislock.inventory import Stock, TakeResult, sold_out, sold_out_counts
from django_redislock.inventory.shards import home_bucket
from django_redislock.inventory.sold_out import memory
from django_redislock.inventory.sold_out_counts import counts

from . import inventory_tasks
from .conftest import RedisTarget
from .processes import ROOT, wait_for

DEADLINE = 10.0


@pytest.fixture(autouse=True)
def _memory_trusted(monkeypatch: pytest.MonkeyPatch) -> None:
    """A remembered sell-out is trusted for the whole test (no listener race, no ageing):
    which take is answered locally and which by Redis is then decided by the test alone."""
    monkeypatch.setattr(sold_out, "UNTRACKED_AGE", 3600.0)
    monkeypatch.setattr(sold_out, "MAX_AGE", 3600.0)
    memory.clear()


def make_stock(target: RedisTarget, item: str) -> Stock:
    return Stock(item, order_task=inventory_tasks.record_order, using=target.queue_backend())


def sold_out_counted(stock: Any) -> tuple[int, int]:
    """(by Redis, local) as ``stats()`` reads them from the meta hash."""
    refused = stock.stats().refused
    return refused["sold_out_redis"], refused["sold_out_local"]


def test_local_and_redis_sold_outs_reach_redis_at_a_flush(redis_target: RedisTarget) -> None:
    stock = make_stock(redis_target, "counted")
    stock.set(1)
    assert stock.take(buyer="first").ok
    assert stock.take(buyer="late-0").result is TakeResult.SOLD_OUT  # the take script
    for n in range(1, 4):
        assert stock.take(buyer=f"late-{n}").result is TakeResult.SOLD_OUT  # the local flag
    assert asyncio.run(stock.take_async(buyer="late-4")).result is TakeResult.SOLD_OUT  # local
    memory.clear()  # as another process would: the take script again
    assert asyncio.run(stock.take_async(buyer="late-5")).result is TakeResult.SOLD_OUT
    memo = (id(stock.backend), stock.keys()[0])
    # too old: a probe GET (``at=0.0`` was not old on a machine up for less than MAX_AGE)
    memory.entries[memo] = memory.entries[memo]._replace(at=time.monotonic() - 2 * 3600.0)
    assert stock.take(buyer="late-6").result is TakeResult.SOLD_OUT
    assert stock.take(2, buyer="late-7").result is TakeResult.SOLD_OUT  # local again
    assert sold_out_counted(stock) == (0, 0)  # nothing written by the takes themselves
    assert counts.flush()
    assert sold_out_counted(stock) == (3, 5)
    assert counts.pending() == {}
    assert counts.flush()  # nothing pending: nothing added
    assert sold_out_counted(stock) == (3, 5)
    refused = stock.stats().refused
    assert (refused["duplicate"], refused["not_open"], refused["ended"]) == (0, 0, 0)


def test_a_sharded_refusal_counts_once_in_the_buyers_home_bucket(
    redis_target: RedisTarget,
) -> None:
    stock = make_stock(redis_target, "counted-split")
    stock.set(0, shards=3)
    buyers: dict[int, str] = {}
    for n in range(200):
        buyers.setdefault(home_bucket(f"c{n}", 3), f"c{n}")
    # bucket 0's buyer asks every bucket (all sold out): one refusal, by Redis, in bucket 0
    assert stock.take(buyer=buyers[0]).result is TakeResult.SOLD_OUT
    # then every bucket is remembered: refused locally, in the buyer's home bucket
    assert stock.take(buyer=buyers[2]).result is TakeResult.SOLD_OUT
    assert asyncio.run(stock.take_async(buyer=buyers[2])).result is TakeResult.SOLD_OUT
    memory.clear()
    assert asyncio.run(stock.take_async(buyer=buyers[1])).result is TakeResult.SOLD_OUT
    assert counts.flush()
    parts = stock.bucket_stats()
    found = [(p.refused["sold_out_redis"], p.refused["sold_out_local"]) for p in parts]
    assert found == [(1, 0), (1, 0), (0, 2)]
    total = stock.stats().refused
    assert (total["sold_out_redis"], total["sold_out_local"]) == (2, 2)


def test_a_failed_flush_keeps_the_counts_and_warns_once(
    redis_target: RedisTarget, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    stock = make_stock(redis_target, "counted-kept")
    stock.set(1)
    assert stock.take(buyer="first").ok
    assert stock.take(buyer="late-0").result is TakeResult.SOLD_OUT
    assert stock.take(buyer="late-1").result is TakeResult.SOLD_OUT

    def unreachable(client: Any, calls: Any) -> Any:
        raise ConnectionFailed("Redis is unreachable (test)")

    monkeypatch.setattr(sold_out_counts, "run_batch", unreachable)
    with caplog.at_level(logging.INFO, logger="django_redislock.inventory"):
        assert not counts.flush()
        assert stock.take(buyer="late-2").result is TakeResult.SOLD_OUT  # counted meanwhile
        assert not counts.flush()
        monkeypatch.undo()
        assert counts.flush()
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "kept for the next flush" in warnings[0].getMessage()
    assert any("reach Redis again" in r.getMessage() for r in caplog.records)
    assert sold_out_counted(stock) == (1, 2)  # nothing lost, nothing twice


def test_the_pending_table_is_bounded(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(sold_out_counts, "MAX_BUCKETS", 2)
    backend: Any = object()
    with caplog.at_level(logging.WARNING, logger="django_redislock.inventory"):
        for n in range(4):
            counts.count(backend, [f"u{n}", f"m{n}"], True)
        counts.count(backend, ["u0", "m0"], False)  # a bucket already pending still counts
    assert counts.pending() == {(id(backend), "m0"): (1, 1), (id(backend), "m1"): (0, 1)}
    assert counts.dropped == 2 and len(caplog.records) == 1


def test_a_cleared_stock_gets_no_meta_hash_back(redis_target: RedisTarget) -> None:
    stock = make_stock(redis_target, "counted-cleared")
    stock.set(0)
    assert stock.take(buyer="late").result is TakeResult.SOLD_OUT
    assert stock.clear()
    assert counts.flush()
    assert redis_target.raw.exists(stock.keys()[1]) == 0


def test_the_thread_flushes_by_itself(
    redis_target: RedisTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    stock = make_stock(redis_target, "counted-timer")
    stock.set(0)
    monkeypatch.setattr(sold_out_counts, "EVERY", 0.05)
    monkeypatch.setattr(sold_out_counts, "TIMER", True)  # off for the other tests (conftest)
    assert stock.take(buyer="late-0").result is TakeResult.SOLD_OUT
    assert stock.take(buyer="late-1").result is TakeResult.SOLD_OUT
    assert counts.thread is not None and counts.thread.daemon
    counts.wake.set()  # a thread started by an earlier test waits with the timer off
    wait_for(lambda: sold_out_counted(stock) == (1, 1), DEADLINE, "the timer's flush")


def test_a_forked_child_starts_with_no_counts_and_its_own_thread() -> None:
    backend: Any = object()
    counts.count(backend, ["u", "m"], True)
    parent_thread = counts.thread
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report, never return into pytest
        try:
            empty = counts.entries == {} and counts.thread is None
            counts.count(backend, ["u", "m"], False)
            own = counts.thread is not None and counts.thread.is_alive()
            os.write(write, b"ok" if empty and own else b"no")
        finally:
            os._exit(0)
    os.close(write)
    answer = os.read(read, 8)
    os.close(read)
    os.waitpid(pid, 0)
    assert answer == b"ok"
    assert counts.thread is parent_thread and counts.pending() == {(id(backend), "m"): (0, 1)}


def test_a_flush_forgets_written_buckets_once_the_table_is_half_full(
    fakeredis_target: RedisTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sold_out_counts, "MAX_BUCKETS", 4)
    stocks = [make_stock(fakeredis_target, f"counted-{n}") for n in range(2)]
    for stock in stocks:
        stock.set(0)
        assert stock.take(buyer="late").result is TakeResult.SOLD_OUT
    assert len(counts.entries) == 2
    assert counts.flush()
    assert counts.entries == {}  # written, then forgotten: room for other sales
    assert [sold_out_counted(stock) for stock in stocks] == [(1, 0), (1, 0)]
    assert stocks[0].take(buyer="later").result is TakeResult.SOLD_OUT  # counted again
    assert counts.flush() and sold_out_counted(stocks[0]) == (1, 1)


CHILD = """
import json, os, sys
import django
django.setup()
from django_redislock.backends.redis import RedisQueueBackend
from django_redislock.inventory import Stock, TakeResult, sold_out
sold_out.UNTRACKED_AGE = sold_out.MAX_AGE = 3600.0  # 1 answer by Redis, then 2 local
stock = Stock("counted-exit", queue=None, using=RedisQueueBackend("test", json.loads(sys.argv[1])))
for n in range(3):
    assert stock.take(buyer=f"late-{n}").result is TakeResult.SOLD_OUT
"""


@pytest.mark.parametrize("exit", ["normal", "SIGKILL"])
def test_a_process_flushes_its_counts_at_exit(single_target: RedisTarget, exit: str) -> None:
    """``atexit`` writes what the timer did not (a SIGKILLed process loses it: documented)."""
    stock = Stock("counted-exit", queue=None, using=single_target.queue_backend())
    stock.set(0)
    code = CHILD + ("os.kill(os.getpid(), 9)\n" if exit == "SIGKILL" else "")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DJANGO_SETTINGS_MODULE": "tests.settings"}
    done = subprocess.run(
        [sys.executable, "-c", code, json.dumps(single_target.params())],
        check=False,
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == (0 if exit == "normal" else -9), done.stderr
    assert sold_out_counted(stock) == ((1, 2) if exit == "normal" else (0, 0))
