"""``manage.py queue_status``: counts of every queue of every alias (text or ``--json``)."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils.module_loading import autodiscover_modules

from ...exceptions import RedisLockError
from ...handlers import queues
from ...queue.registry import queues_of
from ._queue_common import backend_of

COLUMNS = ("alias", "queue", "ready", "delayed", "in_flight", "dead", "oldest_due_age")


class Command(BaseCommand):
    help = "Show ready, delayed, in-flight and dead counts of every queue of every alias."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--using", action="append", help="Only these aliases (repeatable).")
        parser.add_argument("--json", action="store_true", help="Print JSON instead of a table.")

    def handle(self, *args: Any, **options: Any) -> None:
        autodiscover_modules("tasks")
        aliases = options["using"] or list(queues)
        try:
            rows = [row for alias in aliases for row in self.rows(alias)]
        except RedisLockError as exc:
            raise CommandError(str(exc)) from exc
        if options["json"]:
            self.stdout.write(json.dumps(rows, indent=2))
        else:
            self.stdout.write(self.table(rows))

    def rows(self, alias: str) -> list[dict[str, Any]]:
        backend = backend_of(alias)
        names = sorted(set(backend.queue_names()) | set(queues_of(alias)))
        return [{"alias": alias, **backend.queue(name).stats()} for name in names]

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
