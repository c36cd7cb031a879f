"""``manage.py resume_queue QUEUE ...``: hand out a paused queue's tasks again."""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError, CommandParser

from ...exceptions import RedisLockError
from ._flow_common import known_queues
from ._logging import LoggedCommand
from ._queue_common import add_using


class Command(LoggedCommand):
    help = "Resume paused queues; an idle worker wakes at once."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("queues", nargs="+", metavar="QUEUE", help="Queue names.")
        add_using(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        for queue in known_queues(options["using"], options["queues"]):
            try:
                was = queue.is_paused()
                queue.resume()
            except RedisLockError as exc:
                raise CommandError(str(exc)) from exc
            if was:
                self.stdout.write(self.style.SUCCESS(f"Resumed queue {queue.name!r}."))
            else:
                self.stdout.write(f"Queue {queue.name!r} was not paused.")
