"""``manage.py cancel_task ID [--queue NAME]``: cancel one task, queued or running."""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError, CommandParser

from ...exceptions import RedisLockError
from ._logging import LoggedCommand
from ._queue_common import add_using, queue_of

#: What each answer of Queue.cancel tells the operator.
ANSWERS = {
    "removed": "Cancelled task {id!r}: it was queued and is removed.",
    "requested": (
        "Cancelling task {id!r}: it is running; its worker stops it at its next lease "
        "renewal (within a third of its lease) and records it as cancelled."
    ),
    "finished": (
        "Nothing to cancel: task {id!r} is not queued or running in queue {queue!r} "
        "(it finished, was dead-lettered, or never existed). Nothing changed."
    ),
}


class Command(LoggedCommand):
    help = (
        "Cancel one task by id: a queued task is removed, a running one is stopped by its "
        "worker and recorded as cancelled."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("id", help="Task id.")
        parser.add_argument("--queue", default="default", help="Queue name (default: default).")
        parser.add_argument("--reason", default="cancelled by an operator", help="Recorded why.")
        add_using(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        queue = queue_of(options["using"], options["queue"])
        try:
            answer = queue.cancel(options["id"], options["reason"])
        except RedisLockError as exc:
            raise CommandError(str(exc)) from exc
        text = ANSWERS[answer].format(id=options["id"], queue=queue.name)
        style = self.style.WARNING if answer == "finished" else self.style.SUCCESS
        self.stdout.write(style(text))
