"""``manage.py remove_task QUEUE ID``: delete one task whatever its state."""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError, CommandParser

from ...exceptions import RedisLockError
from ._logging import LoggedCommand
from ._queue_common import add_using, queue_of


class Command(LoggedCommand):
    help = "Delete one task (ready, delayed, in flight or dead) by id."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("queue", help="Queue name.")
        parser.add_argument("id", help="Task id.")
        add_using(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        queue = queue_of(options["using"], options["queue"])
        try:
            removed = queue.remove(options["id"])
        except RedisLockError as exc:
            raise CommandError(str(exc)) from exc
        if not removed:
            raise CommandError(f"No task {options['id']!r} in queue {queue.name!r}.")
        self.stdout.write(self.style.SUCCESS(f"Removed task {options['id']!r}."))
