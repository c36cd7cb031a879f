"""``manage.py rate_limit_queue QUEUE RATE``: limit how fast a queue's tasks are handed out."""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError, CommandParser

from ...exceptions import InvalidArgument, RedisLockError
from ...validation import parse_rate
from ._flow_common import known_queues
from ._logging import LoggedCommand
from ._queue_common import add_using


class Command(LoggedCommand):
    help = (
        'Set a queue\'s rate limit ("100/m", "20/s", "5/h"; "off" removes it), kept in Redis '
        "and obeyed by every worker from its next claim. Without RATE: show it."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("queue", help="Queue name.")
        parser.add_argument("rate", nargs="?", help='"N/s", "N/m", "N/h" or "off".')
        add_using(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        rate = options["rate"]
        if rate not in (None, "off"):
            try:
                parse_rate(rate, "RATE")
            except InvalidArgument as exc:
                raise CommandError(str(exc)) from exc
        [queue] = known_queues(options["using"], [options["queue"]])
        try:
            if rate is not None:
                queue.set_rate_limit(None if rate == "off" else rate)
            current = queue.rate_limit()
        except RedisLockError as exc:
            raise CommandError(str(exc)) from exc
        if current is None:
            self.stdout.write(f"Queue {queue.name!r} has no rate limit.")
        else:
            self.stdout.write(self.style.SUCCESS(f"Queue {queue.name!r}: at most {current}."))
