"""``drain_queue --pool process``: its options, their checks, and the start of the pool.

The supervisor itself is :mod:`django_redislock.queue.supervisor`; this module only
turns the command's options (and the alias's ``WORKER_MAX_*_PER_CHILD`` defaults)
into one, and the pool's outcome into the command's summary or a ``CommandError``.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any, NoReturn

from django.core.management.base import BaseCommand, CommandError, CommandParser

from ...queue.pool_child import run_child
from ...queue.supervisor import Supervisor
from ...queue.worker import Summary, Worker
from ._queue_common import backend_of, queue_of
from .run_scheduler import scheduler_thread

#: Options that only the process pool takes, and the alias option behind each default.
CHILD_OPTIONS = {
    "max_tasks_per_child": "WORKER_MAX_TASKS_PER_CHILD",
    "max_memory_per_child": "WORKER_MAX_MEMORY_PER_CHILD",
}


def add_pool_arguments(parser: CommandParser) -> None:
    parser.add_argument(
        "--max-tasks-per-child",
        type=int,
        default=None,
        help="Replace a pool process after it ran N tasks "
        "(default: OPTIONS['WORKER_MAX_TASKS_PER_CHILD'], no limit).",
    )
    parser.add_argument(
        "--max-memory-per-child",
        type=int,
        default=None,
        metavar="MB",
        help="Replace a pool process, between two tasks, once its resident memory passes MB "
        "megabytes (default: OPTIONS['WORKER_MAX_MEMORY_PER_CHILD'], no limit).",
    )


def check_pool_options(options: dict[str, Any]) -> None:
    """CommandError naming the option for a value the pool cannot take."""
    for name in CHILD_OPTIONS:
        if options.get(name) is not None and options[name] < 1:
            raise CommandError(f"--{name.replace('_', '-')} must be at least 1")
    if options.get("pool") != "process":
        for name in CHILD_OPTIONS:
            if options.get(name) is not None:
                raise CommandError(f"--{name.replace('_', '-')} needs --pool process")
        return
    if options.get("max_tasks") is not None:
        raise CommandError(
            "--max-tasks stops one worker; with --pool process use --max-tasks-per-child"
        )
    if not hasattr(os, "fork"):
        raise CommandError("--pool process needs os.fork(), which this platform lacks")
    if threading.current_thread() is not threading.main_thread():
        raise CommandError("--pool process must run in the main thread (it handles signals)")


def run_pool(command: Any, names: list[str], options: dict[str, Any]) -> Summary:
    """Run the process pool until it stops; its summary, or a CommandError if it failed."""
    alias = options["using"]
    backend = backend_of(alias)
    queues = {name: queue_of(alias, name) for name in names}
    child = {name: options.get(name) or backend.options[key] for name, key in CHILD_OPTIONS.items()}
    deadline = None if options["timeout"] is None else time.monotonic() + options["timeout"]
    concurrency = options.get("concurrency") or os.cpu_count() or 1
    # without --batch the pool's default batch is shared by its children: each child runs one
    # task at a time, so a child claiming 100 would leave the others idle on a short queue of
    # slow tasks (I/O-bound 2,000 x 10 ms at 32 children: 29-45 % of ideal)
    batch = child_batch(options["batch"], concurrency)

    def make_worker(progress: Any) -> Worker:
        left = None if deadline is None else max(deadline - time.monotonic(), 0.001)
        return Worker(
            list(queues.values()),
            batch=batch,
            burst=options["burst"],
            max_tasks=child["max_tasks_per_child"],
            timeout=left,
            lease=options["lease"],
            progress=progress,
            give_up=options.get("give_up"),
            pool="solo",  # a child is one solo worker, whatever the alias's WORKER_POOL
        )

    def child_main(slot: int, pipes: tuple[int, int], close: list[int]) -> NoReturn:
        around = (lambda: scheduler_thread(options)) if slot == 0 else None
        also = child_log(command, slot, options["log_every"])
        memory = child["max_memory_per_child"]
        run_child(make_worker, pipes, close, max_memory=memory, around=around, also=also)

    outcome = Supervisor(child_main, queues, concurrency, deadline, options["burst"]).run()
    if outcome.forced:
        raise CommandError(
            "stopped at once by a second signal: running tasks were interrupted; their "
            f"claims come back when their leases end ({command.summary_line(outcome.summary)})"
        )
    if outcome.failure:
        raise CommandError(f"the process pool stopped: {outcome.failure}")
    return outcome.summary


#: Tasks a worker claims per round trip without ``--batch`` (the process pool: all children).
DEFAULT_BATCH = 100


def child_batch(batch: int | None, concurrency: int) -> int:
    """Tasks one child claims per round trip: ``--batch``, else its share of the default."""
    if batch is not None:
        return batch
    return max(1, -(-DEFAULT_BATCH // concurrency))


def child_log(command: BaseCommand, slot: int, every: int) -> Any:
    """A child's progress line every ``every`` tasks (a progress bar per child would garble)."""

    def log(summary: Summary) -> None:
        if summary.processed % every == 0:
            line = command.summary_line(summary, running=True)  # type: ignore[attr-defined]
            command.stdout.write(f"[child {slot}, pid {os.getpid()}] {line}")

    return log
