"""``manage.py pause_queue QUEUE ...``: stop handing out a queue's tasks; enqueueing goes on."""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError, CommandParser

from ...exceptions import RedisLockError
from ._flow_common import known_queues
from ._logging import LoggedCommand
from ._queue_common import add_using


class Command(LoggedCommand):
    help = (
        "Pause queues: workers and pop() claim nothing from them until resume_queue; "
        "tasks keep being queued, running tasks finish."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("queues", nargs="+", metavar="QUEUE", help="Queue names.")
        add_using(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        for queue in known_queues(options["using"], options["queues"]):
            try:
                queue.pause()
            except RedisLockError as exc:
                raise CommandError(str(exc)) from exc
            self.stdout.write(self.style.SUCCESS(f"Paused queue {queue.name!r}."))
