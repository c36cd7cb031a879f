"""``manage.py purge_queue QUEUE``: delete every task of a queue (asks unless ``--yes``)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError, CommandParser

from ...exceptions import RedisLockError
from ._logging import LoggedCommand
from ._queue_common import add_using, known_queue_names, no_such_queue, queue_of


class Command(LoggedCommand):
    help = "Delete every task (ready, delayed, in flight and dead) of a queue, in small chunks."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("queue", help="Queue name.")
        add_using(parser)
        parser.add_argument("--yes", action="store_true", help="Do not ask for confirmation.")

    def handle(self, *args: Any, **options: Any) -> None:
        alias = options["using"]
        queue = queue_of(alias, options["queue"])
        try:
            stats = queue.stats()
            total = stats["ready"] + stats["delayed"] + stats["in_flight"] + stats["dead"]
            if not total:
                if queue.name not in known_queue_names(alias):
                    raise no_such_queue(alias, queue.name)
                self.stdout.write(f"Nothing to delete: queue {queue.name!r} is empty.")
                return
            if not options["yes"] and not self.confirm(queue.name, total):
                raise CommandError("Purge cancelled.")
            deleted = queue.purge()
        except RedisLockError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(self.style.SUCCESS(f"Deleted {deleted} task(s) from {queue.name!r}."))

    def confirm(self, name: str, total: int) -> bool:
        answer = input(f"Delete all {total} task(s) of queue {name!r}? Type 'yes' to continue: ")
        return answer.strip().lower() == "yes"
