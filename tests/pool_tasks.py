"""@task functions that the process-pool tests run in ``drain_queue --pool process`` children.

Listed in ``REDISLOCK_TASK_MODULES`` by the tests that spawn the pools. Every run
records ``run:<tag>:<pid>`` and ``done:<tag>:<pid>`` in the shared runs list
(:func:`tests.testapp.tasks.record`), so a test can tell which child ran what.
"""

from __future__ import annotations

import os
import signal
import time

from django_redislock import queues, task

from .testapp.tasks import record, runs

#: Memory a ``hog`` run keeps for the rest of its process's life.
HELD: list[bytes] = []
#: Where ``square`` writes its results (a hash on the default alias's server).
RESULTS_KEY = "test:{pool}:results"


@task(queue="pool")
def step(tag: str, seconds: float = 0) -> None:
    record(f"run:{tag}:{os.getpid()}")
    time.sleep(seconds)
    record(f"done:{tag}:{os.getpid()}")


@task(queue="pool")
def square(n: int) -> int:
    record(f"run:sq{n}:{os.getpid()}")
    queues["default"].client.hset(RESULTS_KEY, str(n), n * n)  # type: ignore[attr-defined]
    return n * n


@task(queue="pool", max_attempts=2, retry_backoff=0.05, retry_backoff_max=0.05)
def always_fails(tag: str) -> None:
    record(f"fail:{tag}:{os.getpid()}")
    raise ValueError(f"always fails: {tag}")


@task(queue="pool")
def hog(tag: str, megabytes: int) -> None:
    """Keeps ``megabytes`` of touched memory, as a leaking task would."""
    HELD.append(b"\x01" * (megabytes * 1024 * 1024))
    record(f"done:{tag}:{os.getpid()}")


@task(queue="pool", max_attempts=2, retry_backoff=0.1, retry_backoff_max=0.1, time_limit=1.0)
def hang(tag: str) -> None:
    """Hangs where no in-process alarm reaches it (SIGALRM blocked, as in a stuck C call).

    Records ``overlap`` if a child that ran it before is still alive: the task must
    never run in two children at once.
    """
    for earlier in runs():
        if earlier.startswith(f"run:{tag}:"):
            try:
                os.kill(int(earlier.rsplit(":", 1)[1]), 0)
            except ProcessLookupError:
                continue
            record(f"overlap:{tag}")
    record(f"run:{tag}:{os.getpid()}")
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
    time.sleep(120)


#: The list a ``gate`` run waits on: a test pushes one token per run it lets finish.
GATE_KEY = "test:{pool}:gate"


@task(queue="pool")
def gate(tag: str) -> None:
    """Records its start, then waits (60 s at most) until the test opens the gate."""
    record(f"run:{tag}:{os.getpid()}")
    client = queues["default"].client  # type: ignore[attr-defined]
    for _ in range(60):  # short waits: the client's socket timeout is shorter than 60 s
        if client.blpop([GATE_KEY], timeout=1):
            break
    record(f"done:{tag}:{os.getpid()}")


@task(queue="pool")
def stubborn(tag: str, seconds: float) -> None:
    """Ignores stop signals while it runs (a task stuck in C code)."""
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
    record(f"run:{tag}:{os.getpid()}")
    time.sleep(seconds)
    record(f"done:{tag}:{os.getpid()}")


def pids(kind: str, tag: str | None = None) -> list[int]:
    """The pids of the ``kind`` records (of ``tag``, or of every tag), in order."""
    found = []
    for entry in runs():
        parts = entry.split(":")
        if parts[0] == kind and (tag is None or parts[1] == tag) and len(parts) == 3:
            found.append(int(parts[2]))
    return found


def count(kind: str, tag: str) -> int:
    return len(pids(kind, tag))
