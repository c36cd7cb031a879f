"""``manage.py queue_status``: counts of every queue of every alias (text or ``--json``).

``--check --max-age S`` turns it into a probe for readiness checks and cron
monitors: it exits non-zero (a ``CommandError``) when the oldest ready task of a
queue has been due for more than ``S`` seconds, or when Redis does not answer.
"""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import CommandError, CommandParser

from ...exceptions import RedisLockError
from ...handlers import queues
from ...queue.registry import autodiscover, queues_of
from ._logging import LoggedCommand
from ._queue_common import backend_of

COLUMNS = ("alias", "queue", "ready", "delayed", "in_flight", "dead", "oldest_due_age")


class Command(LoggedCommand):
    help = "Show ready, delayed, in-flight and dead counts of every queue of every alias."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--using", action="append", help="Only these aliases (repeatable).")
        parser.add_argument("--json", action="store_true", help="Print JSON instead of a table.")
        parser.add_argument(
            "--check",
            action="store_true",
            help="Exit non-zero when a queue's oldest ready task is older than --max-age.",
        )
        parser.add_argument(
            "--max-age", type=float, default=None, help="Seconds allowed by --check."
        )
        parser.add_argument(
            "--queue", action="append", help="With --check: only these queue names (repeatable)."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["check"] and (options["max_age"] is None or options["max_age"] < 0):
            raise CommandError("--check needs --max-age SECONDS (>= 0)")
        autodiscover()  # a task module that fails to import does not hide the others
        aliases = options["using"] or list(queues)
        try:
            rows = [row for alias in aliases for row in self.rows(alias)]
        except RedisLockError as exc:
            raise CommandError(str(exc)) from exc
        if options["check"]:
            self.check_ages(rows, options["max_age"], options["queue"])
            return
        if options["json"]:
            self.stdout.write(json.dumps(rows, indent=2))
        else:
            self.stdout.write(self.table(rows))

    def rows(self, alias: str) -> list[dict[str, Any]]:
        backend = backend_of(alias)
        names = sorted(set(backend.queue_names()) | set(queues_of(alias)))
        return [{"alias": alias, **backend.queue(name).stats()} for name in names]

    def check_ages(
        self, rows: list[dict[str, Any]], max_age: float, only: list[str] | None
    ) -> None:
        """Raise CommandError naming every queue whose oldest ready task is too old."""
        if only:
            rows = [row for row in rows if row["queue"] in only]
        late = [row for row in rows if row["oldest_due_age"] > max_age]
        if late:
            names = ", ".join(
                f"{row['alias']}/{row['queue']} ({row['oldest_due_age']:.1f}s, "
                f"{row['ready']} ready)"
                for row in late
            )
            raise CommandError(f"oldest ready task older than {max_age:g}s: {names}")
        self.stdout.write(
            self.style.SUCCESS(f"OK: {len(rows)} queue(s), none older than {max_age:g}s")
        )

    def table(self, rows: list[dict[str, Any]]) -> str:
        if not rows:
            return "No queues yet."
        cells = [[self.cell(row[col]) for col in COLUMNS] for row in rows]
        widths = [max(len(col), *(len(r[i]) for r in cells)) for i, col in enumerate(COLUMNS)]
        lines = ["  ".join(col.ljust(w) for col, w in zip(COLUMNS, widths, strict=True))]
        lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in cells]
        return "\n".join(lines)

    @staticmethod
    def cell(value: Any) -> str:
        return f"{value:.1f}s" if isinstance(value, float) else str(value)
