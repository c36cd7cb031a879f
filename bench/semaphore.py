"""Semaphore: the acquire+release cycle of a permit against the mutex's cycle.

Each round gives every case about ``seconds`` of uncontended cycles on a private server, the
cases taking turns in 50 ms slices (:func:`bench.common.interleaved`), so a burst of load
from a neighbour hits them alike; the ratio semaphore/mutex is taken within each round and
its median over the rounds reported (target: at least 0.8x, issue 30). Both cycles have a
ttl (no watchdog), so each is two script calls: a grant and a release.
"""

from __future__ import annotations

import os
from typing import Any

from bench.common import interleaved, median


def run(server: Any, quick: bool) -> dict[str, Any]:
    from django.test import override_settings

    from django_redislock.handlers import locks

    rounds, seconds = (3, 0.5) if quick else (5, 3.0)
    params = {"LOCATION": server.url, "KEY_PREFIX": "bsem"}
    with override_settings(REDISLOCK_LOCKS={"default": params}):
        backend = locks["default"]
        sem = backend.semaphore("b:sem", 5, ttl=10)
        sem_one = backend.semaphore("b:sem-1", 1, ttl=10)

        def mutex() -> None:
            with backend.lock("b:mutex", ttl=10):
                pass

        def permit() -> None:
            found = sem.acquire()
            assert found is not None
            found.release()

        def permit_with() -> None:
            with backend.semaphore("b:sem-with", 5, ttl=10):
                pass

        def permit_one() -> None:
            with sem_one:
                pass

        cases = {
            "mutex: with lock(name, ttl=10)": mutex,
            "semaphore(5): sem.acquire() + permit.release()": permit,
            "semaphore(5): with semaphore(name, 5, ttl=10)": permit_with,
            "semaphore(1): with sem": permit_one,
        }
        for fn in cases.values():
            for _ in range(200):
                fn()
        loads = [os.getloadavg()[0]]
        per_round = interleaved(cases, seconds=seconds, rounds=rounds)
        loads.append(os.getloadavg()[0])
    floor = "mutex: with lock(name, ttl=10)"
    names = list(cases)
    rows = []
    for name in cases:
        ratios = [r[name] / r[floor] for r in per_round]
        rows.append(
            {
                "cycle": name,
                "cycles/s (median)": median(r[name] for r in per_round),
                "x mutex (median)": median(ratios),
                "x mutex (range)": f"{min(ratios):.2f}-{max(ratios):.2f}",
            }
        )
    headline = median(r[names[1]] / r[floor] for r in per_round)
    return {
        "name": "semaphore",
        "columns": list(rows[0]),
        "rows": rows,
        "notes": [
            f"{rounds} interleaved rounds of about {seconds:g} s per case (50 ms slices, order "
            "rotated each round); ratios within a round; median and range over the rounds. "
            f"1-minute load average {min(loads):.1f}-{max(loads):.1f} on {os.cpu_count()} CPUs.",
            f"semaphore acquire+release vs the mutex cycle: {headline:.2f}x "
            f"(target: at least 0.8x: {'met' if headline >= 0.8 else 'NOT met'}).",
            "Reproduce: python3 dev.py bench semaphore.",
        ],
    }
