"""What every library's pass of the process-pool benchmark shares (see :mod:`bench.pool`).

The no-op task each library runs, the note each worker process leaves of its first run
(so that a pass is timed from its first task as well as from its start), and what a
drain hands back to the benchmark process.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any

import redis

#: Worker processes of every library.
CONCURRENCY = 2
#: Seconds between two looks at the queue while a drain runs (every library).
POLL = 0.005
#: Where each worker process notes when its first run started (see :func:`first_run`).
FIRST_KEY = "bench:pool:first"
#: The private server's ``host`` and ``port``, set by :func:`run` before any fork.
SERVER: dict[str, Any] = {}
#: Whether this process has noted its first run; every forked process starts without.
_noted = False


def _forget_first_run() -> None:
    global _noted
    _noted = False


os.register_at_fork(after_in_child=_forget_first_run)


def first_run() -> None:
    """Note on the server when this process's first run started (``perf_counter()``).

    Once per process (a flag, reset in every forked child), so a run costs one global
    lookup and the pass one ``RPUSH`` and one connection per process: the task stays a
    no-op. ``perf_counter()`` is CLOCK_MONOTONIC on Linux, one clock for every process,
    so the benchmark takes the earliest note as the run's first task.
    """
    global _noted
    if _noted:
        return
    _noted = True
    started = time.perf_counter()
    with redis.Redis(**SERVER) as client:
        client.rpush(FIRST_KEY, repr(started))


def noop(*args: Any) -> None:
    """The task every library runs (arq's is :func:`arq_noop`): nothing past :func:`first_run`."""
    first_run()


async def arq_noop(ctx: dict[str, Any], i: int) -> None:
    """arq's no-op (its functions take the worker's context first)."""
    first_run()


@dataclass
class Drain:
    """One timed drain: when it began (``perf_counter``, system-wide), and what it did."""

    started: float
    processed: int
    #: seconds until the run itself returned (our pool: its last child exited)
    returned: float
