"""Refusals answered without Redis (``django_redislock.locking.known``): exact, free, bounded.

A GCRA refusal tells a lower bound of the limit's state that only a reset moves back, so a
process answers the refusals it implies locally. These tests show that such a refusal is
always one the server gives too (no under-use), that admissions still all go to the server
(never more than the limit, across threads and processes), that a local refusal sends no
command, and that a reset or a changed rate is judged as the server judges it. Limits
whose counts are asserted are "1/h": nothing refills during a test, so the admitted units
are exactly the burst however slow the machine.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import time
from typing import Any

import pytest

from django_redislock.locking.known import HORIZON, KnownLimits, known_limits

from .conftest import RedisTarget
from .limiter_worker import counting
from .processes import ROOT


@pytest.fixture(params=["single", "cluster"])
def target(request: pytest.FixtureRequest) -> RedisTarget:
    found: RedisTarget = request.getfixturevalue(f"{request.param}_target")
    return found


def steady(backend: Any) -> Any:
    """``backend`` with its bounds trusted for an hour instead of a second, so that a stall
    of a loaded machine cannot age them in the middle of a test that counts calls (the
    horizon itself is tested on its own)."""
    known_limits(backend).horizon = 3600.0
    return backend


def commands(raw: Any) -> dict[str, int]:
    """Calls per command since the last ``CONFIG RESETSTAT``, ``INFO``/``CONFIG`` left out."""
    stats = raw.info("commandstats")
    found = {name.removeprefix("cmdstat_"): int(v["calls"]) for name, v in stats.items()}
    return {name: n for name, n in found.items() if name not in ("info", "config|resetstat")}


def test_a_refusal_served_locally_sends_no_command(single_target: RedisTarget) -> None:
    raw = single_target.raw
    limit = steady(single_target.lock_backend()).rate_limiter("api", "1/h", burst=2)
    assert [limit.try_acquire().admitted for _ in range(3)] == [True, True, False]
    raw.config_resetstat()
    before = commands(raw)

    async def asyncio_side() -> list[bool]:
        refused = [(await limit.try_acquire_async()).admitted for _ in range(50)]
        return refused + [await limit.acquire_async(timeout=5) for _ in range(5)]

    answers = [limit.try_acquire() for _ in range(100)]
    waited = [limit.acquire(timeout=5) for _ in range(5)]  # the slot is an hour away
    assert not any(a.admitted for a in answers) and not any(waited)
    assert all(3000 < a.retry_after <= 3600 for a in answers)
    assert not any(asyncio.run(asyncio_side()))
    assert commands(raw) == before  # 160 refusals, not one command

    remote = single_target.lock_backend().rate_limiter("api", "1/h", burst=2, local_refusals=False)
    assert [remote.try_acquire().admitted for _ in range(10)] == [False] * 10
    assert commands(raw)["evalsha"] == before.get("evalsha", 0) + 10  # the count is real


def test_every_local_refusal_is_one_the_server_gives(redis_target: RedisTarget) -> None:
    """Decisions on a limit that refills during the test ("50/s", burst 3, costs 1-3, two
    keys): before each, what the table would refuse is asked of the server directly (a
    limiter that asks Redis for everything). The server must refuse too and say at least
    as long, less the time between the two answers; it may admit only when the local wait
    was shorter than that time."""
    backend = redis_target.lock_backend()
    limit = backend.rate_limiter("api", "50/s", burst=3)
    server = backend.rate_limiter("api", "50/s", burst=3, local_refusals=False)
    local = admitted = 0
    deadline = time.monotonic() + 3.0
    for n in range(3000):
        if time.monotonic() > deadline:
            break
        cost, key = 1 + n % 3, f"k{n % 2}"
        started = time.monotonic()
        known = limit._known_refusal(cost, key, 0.0)
        if known is None:
            admitted += limit.try_acquire(cost, key=key).admitted
            continue
        local += 1
        answer = server.try_acquire(cost, key=key)
        between = time.monotonic() - started
        if answer.admitted:  # only when the local wait had run out by the server's answer
            assert known.retry_after <= between, (n, cost, known, between)
        else:
            assert answer.retry_after + between >= known.retry_after, (n, cost, known, answer)
    assert local > 0 and admitted > 0, (local, admitted)


def test_threads_admit_exactly_the_burst(redis_target: RedisTarget) -> None:
    backend = redis_target.lock_backend()
    calls: list[int] = []
    counting(backend, calls)
    limit = backend.rate_limiter("api", "1/h", burst=20)
    units: list[int] = []

    def run() -> None:
        for n in range(300):
            cost = (3, 1, 2)[n % 3]
            if limit.try_acquire(cost).admitted:
                units.append(cost)

    threads = [threading.Thread(target=run) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not any(thread.is_alive() for thread in threads)
    assert sum(units) == 20  # not one unit more than the limit, nor one less
    assert len(calls) < 1200 // 2, len(calls)  # most of the 1,200 refusals were local


def spawn(target: RedisTarget, **args: Any) -> subprocess.Popen[str]:
    args = {"location": target.location, "options": target.options, **args}
    return subprocess.Popen(
        [sys.executable, "-m", "tests.limiter_worker", json.dumps(args)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        text=True,
    )


def test_processes_admit_exactly_the_burst(target: RedisTarget) -> None:
    """3 processes x 2 threads x 300 takes (costs 3, 1, 2) on one "1/h" limit of burst 30."""
    args = {"name": "api", "rate": "1/h", "burst": 30, "costs": [3, 1, 2]}
    workers = [spawn(target, **args, threads=2, rounds=300) for _ in range(3)]
    outputs = [worker.communicate(timeout=110)[0] for worker in workers]
    reports = [json.loads(out) for out in outputs]
    assert [r["errors"] for r in reports] == [[]] * 3, outputs
    assert sum(r["decisions"] for r in reports) == 3 * 2 * 300
    assert sum(r["admitted"] for r in reports) == 30  # exactly the burst across processes
    assert sum(r["calls"] for r in reports) < 1800 // 2, reports  # most refusals were local


def test_a_changed_rate_or_burst_is_judged_as_the_server_judges_it(
    redis_target: RedisTarget,
) -> None:
    """The table keeps the limit's state, not its decisions: a limiter of the same name with
    another rate or burst (a limit changed at run time) gets the server's answer."""
    backend = steady(redis_target.lock_backend())
    calls: list[int] = []
    counting(backend, calls)
    old = backend.rate_limiter("api", "1/m", burst=1)
    assert old.try_acquire().admitted
    # an admission of the whole burst tells the next unit is a minute away: no call for it
    assert not old.try_acquire().admitted and len(calls) == 1
    wider = backend.rate_limiter("api", "1/m", burst=3)  # the burst raised
    assert [wider.try_acquire().admitted for _ in range(3)] == [True, True, False]
    stricter = backend.rate_limiter("api", "1/h", burst=1)
    refused = stricter.try_acquire()
    server = backend.rate_limiter("api", "1/h", burst=1, local_refusals=False).try_acquire()
    assert not refused.admitted and not server.admitted
    assert refused.retry_after <= server.retry_after + 1


def test_a_reset_is_seen_here_at_once_and_elsewhere_within_the_horizon(
    redis_target: RedisTarget,
) -> None:
    here = redis_target.lock_backend().rate_limiter("api", "1/h", burst=2)
    # another backend object: its own table, as another process has
    elsewhere = redis_target.lock_backend().rate_limiter("api", "1/h", burst=2)
    assert [here.try_acquire().admitted for _ in range(3)] == [True, True, False]
    assert not elsewhere.try_acquire().admitted  # learned: an hour away
    here.reset()
    assert here.try_acquire().admitted  # forgotten here at once: one unit of two taken
    waited_from = time.monotonic()
    while not elsewhere.try_acquire().admitted:  # the other unit, once its bound is stale
        assert time.monotonic() - waited_from < HORIZON + 10, "the reset was never seen"
        time.sleep(0.05)
    assert not here.try_acquire().admitted

    async def main() -> bool:
        await here.reset_async()
        return (await here.try_acquire_async(2)).admitted

    assert asyncio.run(main())


def test_local_refusals_can_be_turned_off(redis_target: RedisTarget) -> None:
    backend = redis_target.lock_backend()
    calls: list[int] = []
    counting(backend, calls)
    limit = backend.rate_limiter("api", "1/h", burst=1, local_refusals=False)
    assert [limit.try_acquire().admitted for _ in range(5)] == [True] + [False] * 4
    assert len(calls) == 5


# -- the table itself (no server) --------------------------------------------------------


def test_a_bound_is_trusted_for_the_horizon_then_asks_the_server() -> None:
    known = KnownLimits(horizon=1.0)
    known.learn("a", tat=100.0, learned=10.0)
    # interval 1 s, burst 2: cost 1 waits until 99, cost 2 until 100
    assert known.wait("a", now=10.5, interval=1.0, burst=2, cost=1) == 88.5
    assert known.wait("a", now=10.5, interval=1.0, burst=2, cost=2) == 89.5
    assert known.wait("a", now=11.0, interval=1.0, burst=2, cost=1) == 0.0  # stale: ask
    assert known.wait("b", now=10.5, interval=1.0, burst=2, cost=1) == 0.0  # unknown: ask
    known.learn("a", tat=50.0, learned=10.2)  # lower and the higher one is trusted: kept
    assert known.wait("a", now=10.5, interval=1.0, burst=1, cost=1) == 89.5
    known.learn("a", tat=50.0, learned=11.5)  # the higher one is stale: replaced
    assert known.wait("a", now=11.6, interval=1.0, burst=1, cost=1) == pytest.approx(38.4)
    known.forget("a")
    assert known.wait("a", now=11.6, interval=1.0, burst=1, cost=1) == 0.0


def test_the_table_is_bounded() -> None:
    known = KnownLimits(capacity=100, horizon=1.0)
    for n in range(101):
        known.learn(n, tat=1000.0, learned=5.0)
    assert len(known) == 50  # trimmed to half: the next trim is 51 limits away
    for n in range(101, 1000):
        known.learn(n, tat=1000.0, learned=5.0)  # all trusted: the oldest half goes
    assert 50 <= len(known) <= 100
    assert known.wait(999, now=5.5, interval=1.0, burst=1, cost=1) > 0  # the newest kept
    for n in range(1000, 1101):
        known.learn(n, tat=1000.0, learned=10.0)  # the earlier ones are stale by now
    assert len(known) <= 100 and known.wait(1100, 10.5, 1.0, 1, 1) > 0
