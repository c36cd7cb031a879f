"""The queue a dashboard URL names, for every page that acts on one.

The queue pages, the task actions and the flow controls (pause, resume) all start from the
alias and queue name in their URL; they look the queue up here, so none of them imports
another page's module.
"""

from __future__ import annotations

from typing import Any

from django.http import Http404

from ..exceptions import ConfigurationError, InvalidArgument
from ..handlers import queues
from .common import unquote
from .data import supports_scripts


def queue_of(alias: str, name: str) -> Any:
    """The queue ``name`` of alias ``alias`` (both admin-quoted); 404 when either is bad."""
    alias, name = unquote(alias), unquote(name)
    try:
        if alias not in queues or not supports_scripts(queues[alias]):
            raise Http404(f"REDISLOCK_QUEUES has no Redis alias {alias!r}")
        return queues[alias].queue(name)
    except (ConfigurationError, InvalidArgument) as exc:
        raise Http404(str(exc)) from exc


def queue_exists(queue: Any) -> bool:
    """True when the alias's queue list names ``queue`` (callers first check it holds no task).

    A queue that was never enqueued to is not listed; a purged one stays listed.
    """
    return queue.name in queue.backend.queue_names()
