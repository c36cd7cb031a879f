"""Rate limiter against the ``limits`` library: decisions per second and accuracy.

Each round, for each limiter in turn (the order rotates), 4 forked processes ask one
shared limit of ``RATE``/s as fast as they can for the same window, without waiting:
``RateLimiter.try_acquire()`` here, ``limiter.hit(item)`` of ``limits`` with its Redis
storage and its moving-window and fixed-window strategies. Two figures per limiter:

* decisions/s: every answer (admitted or refused) of the 4 processes over the window;
  what a limiter costs the callers it refuses, which under load is most of them;
* admitted/s against the configured rate: the accuracy. Over a window of W seconds each
  strategy may admit its allowance of the first second on top (GCRA with burst B: about
  B + rate * W; a moving window: rate * W; a fixed window up to twice its rate around a
  window boundary), so short windows overstate all of them; 5 s windows are used.

Issue 30's target is >= 1.5x the decisions/s of each ``limits`` strategy, with equal or
better accuracy. The limit is a fresh name per round and limiter.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from collections.abc import Callable
from typing import Any

from bench.common import median

RATE = 200
PROCESSES = 4
LIMITERS = ("django-redislock", "limits moving window", "limits fixed window")


def decider(name: str, url: str, key: str) -> Callable[[], bool]:
    """A callable answering one decision of limiter ``name`` (True: admitted)."""
    if name == "django-redislock":
        from django_redislock.backends.redis import RedisLockBackend

        backend = RedisLockBackend("bench", {"LOCATION": url, "KEY_PREFIX": "bench"})
        # burst RATE: the same allowance as limits' "RATE per 1 second" (that many at once)
        limit = backend.rate_limiter(key, f"{RATE}/s", burst=RATE)
        return lambda: limit.try_acquire().admitted
    from limits import RateLimitItemPerSecond
    from limits.storage import RedisStorage
    from limits.strategies import FixedWindowRateLimiter, MovingWindowRateLimiter

    storage = RedisStorage(url)
    strategy = MovingWindowRateLimiter if "moving" in name else FixedWindowRateLimiter
    limiter = strategy(storage)
    item = RateLimitItemPerSecond(RATE)
    return lambda: bool(limiter.hit(item, key))


def worker(limit: tuple[str, str, str], start: float, seconds: float, out: Any) -> None:
    """Ask ``limit`` (limiter name, url, key) without waiting through the window."""
    decide = decider(*limit)
    decide()  # connected and the scripts loaded before the window
    asked = admitted = 0
    time.sleep(max(0.0, start - time.time()))
    end = start + seconds
    while time.time() < end:
        ok = decide()
        asked += 1
        admitted += ok
    out.put((asked, admitted))


def one_window(name: str, url: str, seconds: float) -> tuple[float, float]:
    """(decisions/s, admitted/s) of ``PROCESSES`` processes on one fresh limit."""
    context = multiprocessing.get_context("fork")
    out = context.Queue()
    key = f"peer-{name.replace(' ', '-')}-{time.time_ns()}"
    start = time.time() + 1.0  # every process is up before the window opens
    procs = [
        context.Process(target=worker, args=((name, url, key), start, seconds, out))
        for _ in range(PROCESSES)
    ]
    for proc in procs:
        proc.start()
    counts = [out.get(timeout=seconds + 60) for _ in procs]
    for proc in procs:
        proc.join(timeout=30)
    return sum(c[0] for c in counts) / seconds, sum(c[1] for c in counts) / seconds


def run(server: Any, quick: bool) -> dict[str, Any]:
    rounds, seconds = (3, 1.0) if quick else (3, 5.0)
    loads = [os.getloadavg()[0]]
    seen: dict[str, list[tuple[float, float]]] = {name: [] for name in LIMITERS}
    for n in range(rounds):
        order = LIMITERS[n % len(LIMITERS) :] + LIMITERS[: n % len(LIMITERS)]
        for name in order:
            seen[name].append(one_window(name, server.url, seconds))
            loads.append(os.getloadavg()[0])
    ours = [decisions for decisions, _ in seen["django-redislock"]]
    rows = []
    for name in LIMITERS:
        decisions = [d for d, _ in seen[name]]
        accuracy = [a / RATE for _, a in seen[name]]
        ratios = [mine / theirs for mine, theirs in zip(ours, decisions, strict=True)]
        rows.append(
            {
                "limiter": name,
                "decisions/s (median)": median(decisions),
                "range": f"{min(decisions):,.0f}-{max(decisions):,.0f}",
                "ours x this (median)": median(ratios),
                "admitted x configured (median)": median(accuracy),
                "accuracy range": f"{min(accuracy):.3f}-{max(accuracy):.3f}",
            }
        )
    return {
        "name": "limiter_peers",
        "columns": list(rows[0]),
        "rows": rows,
        "notes": [
            f"{rounds} rounds; in each, every limiter gets a {seconds:g} s window on a fresh "
            f"limit of {RATE}/s (ours with burst {RATE}: the allowance of limits' '{RATE} per 1 "
            f"second'), the order rotating; {PROCESSES} forked "
            "processes ask without waiting (RateLimiter.try_acquire(); limits' "
            "MovingWindowRateLimiter / FixedWindowRateLimiter .hit() on RedisStorage). "
            f"1-minute load average {min(loads):.1f}-{max(loads):.1f} on {os.cpu_count()} "
            "CPUs.",
            "Target (issue 30): ours >= 1.5x each limits strategy's decisions/s with equal "
            "or better accuracy.",
            "Reproduce: python3 dev.py bench limiter_peers.",
        ],
    }
