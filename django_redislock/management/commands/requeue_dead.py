"""``manage.py requeue_dead QUEUE``: move dead-lettered tasks back to the ready set."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from ...exceptions import RedisLockError
from ._queue_common import add_using, queue_of


class Command(BaseCommand):
    help = "Give dead-lettered tasks of a queue fresh attempts (all of them, or --id ...)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("queue", help="Queue name.")
        add_using(parser)
        parser.add_argument("--id", action="append", dest="ids", help="Only this task id.")

    def handle(self, *args: Any, **options: Any) -> None:
        queue = queue_of(options["using"], options["queue"])
        try:
            if options["ids"]:
                moved = queue.requeue_dead(options["ids"])
            else:
                moved = 0
                for _ in range(queue.stats()["dead"] // 1000 + 1):
                    moved += queue.requeue_dead(limit=1000)
        except RedisLockError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(self.style.SUCCESS(f"Requeued {moved} dead task(s) of {queue.name!r}."))
