"""Rate limiter against the ``limits`` library: decisions per second and accuracy, in two regimes.

Each round, for each limiter in turn (the order rotating), 4 forked processes ask one
shared limit as fast as they can for the same window, without waiting:
``RateLimiter.try_acquire()`` here, ``limiter.hit(item)`` of ``limits`` with its Redis
storage and its moving-window and fixed-window strategies. Two regimes:

* **over the limit** (``RATE``/s): the load a limiter sees during a burst, where most
  answers are refusals. Ours answers a refusal that an earlier answer already implies
  without Redis (``django_redislock.locking.known``); the row "no local refusals" asks
  Redis for every decision, as the ``limits`` strategies do. Also a burst-1 limit of ours,
  the strictest spacing.
* **under the limit** (``UNDER``/s, more than 4 processes can ask): every decision is an
  admission and a round trip for every library; no local answer can help.

Figures per limiter: decisions/s (every answer, admitted or refused, of the 4 processes
over the window) and admitted/s against the configured rate (the accuracy, over the limit
only). Over a window of W seconds each strategy may admit its allowance of the first
second on top (GCRA with burst B: about B + rate * W; a moving window: rate * W; a fixed
window up to twice its rate around a window boundary), so short windows overstate all of
them; 5 s windows are used. Issue 30's target is >= 1.5x the decisions/s of each
``limits`` strategy, with equal or better accuracy. The limit is a fresh name per window.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from collections.abc import Callable
from typing import Any

from bench.common import median

RATE = 200
UNDER = 1_000_000
PROCESSES = 4
#: the largest burst a limit of ours takes (under the limit: any burst admits everything)
MAX_BURST = 5000
OURS = "django-redislock"
#: (label, library, burst of ours: None is the rate, like limits' "N per 1 second")
OVER = (
    (OURS, "ours", None),
    (f"{OURS}, no local refusals", "ours-remote", None),
    (f"{OURS}, burst 1", "ours", 1),
    ("limits moving window", "moving", None),
    ("limits fixed window", "fixed", None),
)
BELOW = (
    (OURS, "ours", None),
    (f"{OURS}, no local refusals", "ours-remote", None),
    ("limits moving window", "moving", None),
    ("limits fixed window", "fixed", None),
)


def decider(spec: tuple[str, int, int | None], url: str, key: str) -> Callable[[], bool]:
    """A callable answering one decision of limiter ``spec`` (True: admitted)."""
    library, rate, burst = spec
    if library.startswith("ours"):
        from django_redislock.backends.redis import RedisLockBackend

        backend = RedisLockBackend("bench", {"LOCATION": url, "KEY_PREFIX": "bench"})
        limit = backend.rate_limiter(
            key, f"{rate}/s", burst=burst or min(rate, MAX_BURST), local_refusals=library == "ours"
        )
        return lambda: limit.try_acquire().admitted
    from limits import RateLimitItemPerSecond
    from limits.storage import RedisStorage
    from limits.strategies import FixedWindowRateLimiter, MovingWindowRateLimiter

    storage = RedisStorage(url)
    strategy = MovingWindowRateLimiter if library == "moving" else FixedWindowRateLimiter
    limiter = strategy(storage)
    item = RateLimitItemPerSecond(rate)
    return lambda: bool(limiter.hit(item, key))


def worker(limit: tuple[Any, str, str], start: float, seconds: float, out: Any) -> None:
    """Ask ``limit`` (spec, url, key) without waiting through the window."""
    spec, url, key = limit
    decide = decider(spec, url, key)
    # connected and the scripts loaded before the window, on another limit
    decider(spec, url, key + "-warm")()
    asked = admitted = 0
    time.sleep(max(0.0, start - time.time()))
    end = start + seconds
    while time.time() < end:
        ok = decide()
        asked += 1
        admitted += ok
    out.put((asked, admitted))


def one_window(spec: Any, url: str, seconds: float) -> tuple[float, float]:
    """(decisions/s, admitted/s) of ``PROCESSES`` processes on one fresh limit."""
    context = multiprocessing.get_context("fork")
    out = context.Queue()
    key = f"peer-{spec[0]}-{spec[2]}-{time.time_ns()}"
    start = time.time() + 1.0  # every process is up before the window opens
    procs = [
        context.Process(target=worker, args=((spec, url, key), start, seconds, out))
        for _ in range(PROCESSES)
    ]
    for proc in procs:
        proc.start()
    counts = [out.get(timeout=seconds + 60) for _ in procs]
    for proc in procs:
        proc.join(timeout=30)
    return sum(c[0] for c in counts) / seconds, sum(c[1] for c in counts) / seconds


def run(server: Any, quick: bool) -> dict[str, Any]:
    rounds, seconds = (2, 1.0) if quick else (3, 5.0)
    loads = [os.getloadavg()[0]]
    regimes = (("over", RATE, OVER), ("under", UNDER, BELOW))
    seen: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for n in range(rounds):
        for regime, rate, limiters in regimes:
            order = limiters[n % len(limiters) :] + limiters[: n % len(limiters)]
            for label, library, burst in order:
                window = one_window((library, rate, burst), server.url, seconds)
                seen.setdefault((regime, label), []).append(window)
                loads.append(os.getloadavg()[0])
    rows = []
    for regime, rate, limiters in regimes:
        ours = [decisions for decisions, _ in seen[(regime, OURS)]]
        for label, _, _ in limiters:
            decisions = [d for d, _ in seen[(regime, label)]]
            accuracy = [a / rate for _, a in seen[(regime, label)]]
            ratios = [mine / theirs for mine, theirs in zip(ours, decisions, strict=True)]
            over = regime == "over"
            rows.append(
                {
                    "limiter": f"{'over' if over else 'under'} the limit: {label}",
                    "decisions/s (median)": median(decisions),
                    "range": f"{min(decisions):,.0f}-{max(decisions):,.0f}",
                    "ours x this (median)": median(ratios),
                    "admitted x configured (median)": median(accuracy) if over else "-",
                    "accuracy range": (
                        f"{min(accuracy):.3f}-{max(accuracy):.3f}" if over else "all admitted"
                    ),
                }
            )
    return {
        "name": "limiter_peers",
        "columns": list(rows[0]),
        "plots": ["decisions/s (median)", "ours x this (median)"],
        "rows": rows,
        "notes": [
            f"{rounds} rounds; in each, every limiter gets a {seconds:g} s window on a fresh "
            f"limit, the order rotating; {PROCESSES} forked processes ask without waiting "
            "(RateLimiter.try_acquire(); limits' MovingWindowRateLimiter / "
            "FixedWindowRateLimiter .hit() on RedisStorage). Over the limit: "
            f"{RATE}/s (ours with burst {RATE}, the allowance of limits' '{RATE} per 1 "
            f"second', unless the row says burst 1); under the limit: {UNDER:,}/s (ours with burst "
            f"{MAX_BURST:,}), more than the processes can ask, so every decision is an admission. "
            f"1-minute load average {min(loads):.1f}-{max(loads):.1f} on {os.cpu_count()} "
            "CPUs.",
            "Target (issue 30): ours >= 1.5x each limits strategy's decisions/s with equal "
            "or better accuracy. Over the limit ours answers most refusals without Redis; "
            "under it every library makes one round trip per decision.",
            "Reproduce: python3 dev.py bench limiter_peers.",
        ],
    }
