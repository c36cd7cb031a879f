"""What the queue commands share: resolving aliases and queues into CommandErrors."""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError, CommandParser

from ...exceptions import ConfigurationError, RedisLockError
from ...handlers import queues
from ...queue.queue import Queue


def add_using(parser: CommandParser) -> None:
    parser.add_argument(
        "--using", default="default", help="The REDISLOCK_QUEUES alias (default: %(default)s)."
    )


def backend_of(alias: str) -> Any:
    """The queue backend of ``alias``, or a CommandError naming the problem."""
    try:
        return queues[alias]
    except ConfigurationError as exc:
        raise CommandError(str(exc)) from exc


def known_queue_names(alias: str) -> list[str]:
    """The queues ``alias`` has seen (any task ever queued), sorted; a CommandError on failure."""
    try:
        return sorted(backend_of(alias).queue_names())
    except RedisLockError as exc:
        raise CommandError(str(exc)) from exc


def no_such_queue(alias: str, name: str) -> CommandError:
    """The error for a queue name that ``alias`` has never seen (probably a typo)."""
    known = ", ".join(map(repr, known_queue_names(alias))) or "none"
    return CommandError(f"Alias {alias!r} has no queue {name!r}; known queues: {known}.")


def queue_of(alias: str, name: str) -> Queue:
    """The queue ``name`` of ``alias``, or a CommandError."""
    try:
        queue: Queue = backend_of(alias).queue(name)
    except RedisLockError as exc:
        raise CommandError(str(exc)) from exc
    return queue
