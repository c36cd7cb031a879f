"""``manage.py requeue_dead QUEUE``: move dead-lettered tasks back to the ready set."""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError, CommandParser

from ...exceptions import RedisLockError
from ...queue.queue import Queue
from ...queue.records import DEAD
from ._logging import LoggedCommand
from ._queue_common import add_using, known_queue_names, no_such_queue, queue_of


class Command(LoggedCommand):
    help = "Give dead-lettered tasks of a queue fresh attempts (all of them, or --id ...)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("queue", help="Queue name.")
        add_using(parser)
        parser.add_argument(
            "--id",
            action="append",
            dest="ids",
            metavar="ID",
            help="Only this dead task; repeat --id for several. Exits non-zero when one of "
            "them is not in the dead-letter set.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        alias = options["using"]
        queue = queue_of(alias, options["queue"])
        try:
            if options["ids"]:
                self.requeue_ids(queue, list(dict.fromkeys(options["ids"])))
                return
            if not queue.stats()["dead"]:
                if queue.name not in known_queue_names(alias):
                    raise no_such_queue(alias, queue.name)
                self.stdout.write(f"Nothing to requeue: queue {queue.name!r} has no dead tasks.")
                return
            moved = 0
            for _ in range(queue.stats()["dead"] // 1000 + 1):
                moved += queue.requeue_dead(limit=1000)
        except RedisLockError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(self.style.SUCCESS(f"Requeued {moved} dead task(s) of {queue.name!r}."))

    def requeue_ids(self, queue: Queue, ids: list[str]) -> None:
        """Requeue ``ids``; a CommandError names those that were not dead (a script must know)."""
        not_dead = [
            task_id for task_id in ids if (task := queue.get(task_id)) is None or task.state != DEAD
        ]
        moved = queue.requeue_dead(ids)
        self.stdout.write(f"Requeued {moved} dead task(s) of {queue.name!r}.")
        if moved < len(ids) and not_dead:
            raise CommandError(
                f"Not in the dead-letter set of {queue.name!r}: {', '.join(map(repr, not_dead))}."
            )
