"""``manage.py list_workers [--using ALIAS] [--json]``: the live workers of a queue alias.

Reads the workers registry (one script; see :mod:`django_redislock.queue.workers`):
each worker's host, pid, pool and concurrency, queues, running tasks with how long
they have run, processed and failed counts, how old its last heartbeat is, and its
pool's health ("ok", or "WEDGED" with why: a worker that beats but runs nothing).
"""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import CommandError, CommandParser

from ...exceptions import RedisLockError
from ...queue.workers import WorkerInfo, WorkerList, list_workers
from ._logging import LoggedCommand
from ._queue_common import add_using, backend_of

COLUMNS = (
    "host", "pid", "pool", "health", "queues", "processed", "failed", "heartbeat", "up", "running"
)  # fmt: skip


class Command(LoggedCommand):
    help = (
        "List the drain_queue workers of a REDISLOCK_QUEUES alias that are alive (heartbeat "
        "within WORKER_HEARTBEAT_TTL), with the tasks each is running."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        add_using(parser)
        parser.add_argument("--json", action="store_true", help="Print one JSON document.")

    def handle(self, *args: Any, **options: Any) -> None:
        alias = options["using"]
        backend = backend_of(alias)
        if not hasattr(backend, "key"):
            raise CommandError(f"The backend of {alias!r} has no workers registry.")
        try:
            listing = list_workers(backend)
        except RedisLockError as exc:
            raise CommandError(str(exc)) from exc
        except Exception as exc:  # a key of the wrong type, a script error: say which
            raise CommandError(f"Cannot read the workers registry of {alias!r}: {exc}") from exc
        if options["json"]:
            self.stdout.write(json.dumps(self.document(alias, listing), indent=2))
        elif not listing.workers:
            self.stdout.write(f"No workers running on {alias!r}.")
        else:
            self.stdout.write(self.table(listing))
            self.stdout.write(
                self.style.SUCCESS(f"{listing.total} worker(s) alive on {alias!r}")
                + (
                    f"; {len(listing.unreadable)} unreadable record(s)"
                    if listing.unreadable
                    else ""
                )
            )

    @staticmethod
    def document(alias: str, listing: WorkerList) -> dict[str, Any]:
        return {
            "alias": alias,
            "total": listing.total,
            "workers": [worker.as_dict(listing.now) for worker in listing.workers],
            "unreadable": listing.unreadable,
        }

    def table(self, listing: WorkerList) -> str:
        rows = [self.row(worker, listing.now) for worker in listing.workers]
        widths = [max(len(c), *(len(r[i]) for r in rows)) for i, c in enumerate(COLUMNS[:-1])]
        lines = ["  ".join(c.ljust(w) for c, w in zip(COLUMNS, [*widths, 0], strict=True))]
        for row in rows:
            lines.append("  ".join(c.ljust(w) for c, w in zip(row, [*widths, 0], strict=True)))
        return "\n".join(line.rstrip() for line in lines)

    @staticmethod
    def row(worker: WorkerInfo, now: int) -> list[str]:
        running = ", ".join(
            f"{task.id} ({task.queue}, {task.running_for(now):.1f}s)" for task in worker.tasks
        )
        if worker.more_tasks:
            running += f" and {worker.more_tasks} more"
        return [
            printable(worker.host),
            str(worker.pid),
            printable(f"{worker.pool} x{worker.concurrency}"),
            "ok" if worker.healthy else printable(f"WEDGED ({worker.wedged})")[:80],
            printable(",".join(worker.queues)),
            str(worker.processed),
            str(worker.failed),
            f"{max(0.0, (now - worker.heartbeat) / 1e6):.1f}s ago",
            f"{max(0.0, (now - worker.started) / 1e6):.0f}s",
            printable(running) or "-",
        ]


def printable(text: str) -> str:
    """``text`` with control characters (newlines, terminal escapes) shown as ``?``."""
    return "".join(c if c.isprintable() else "?" for c in text)
