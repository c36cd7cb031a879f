"""What ``pause_queue``, ``resume_queue`` and ``rate_limit_queue`` share: known queues only."""

from __future__ import annotations

from django.core.management.base import CommandError

from ...exceptions import RedisLockError
from ...queue.queue import Queue
from ...queue.registry import autodiscover, queues_of
from ._queue_common import known_queue_names, no_such_queue, queue_of


def known_queues(alias: str, names: list[str]) -> list[Queue]:
    """The queues ``names`` of ``alias``, each one the alias has seen or a ``@task`` declares.

    Every name is checked before any queue is touched, so a typo in the third name
    changes nothing (a CommandError names it and the known queues).
    """
    autodiscover()  # a queue that only a @task names so far can be paused before its first task
    try:
        known = set(known_queue_names(alias)) | set(queues_of(alias))
    except RedisLockError as exc:
        raise CommandError(str(exc)) from exc
    chosen = [queue_of(alias, name) for name in dict.fromkeys(names)]
    for queue in chosen:
        if queue.name not in known:
            raise no_such_queue(alias, queue.name)
    return chosen
