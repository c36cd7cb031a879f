"""Who holds a lock: owner ids of threads and asyncio tasks, hold tokens and holder metadata.

These run on every acquire, so they avoid exceptions and object churn: the
running loop is looked up without raising, and the metadata JSON is built from
a per-process prefix.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import threading
import time
from typing import Any

from ..exceptions import InvalidArgument

_host = socket.gethostname()
_prefix: tuple[int, str] = (0, "")


def _process_prefix() -> str:
    """``host:pid``, recomputed after a fork."""
    global _prefix
    pid = os.getpid()
    if _prefix[0] != pid:
        _prefix = (pid, f"{_host}:{pid}")
    return _prefix[1]


def current_user() -> tuple[str, str, str | None]:
    """Return ``(id, thread name, task name)`` of the calling thread or asyncio task."""
    thread = threading.current_thread()
    task = asyncio.current_task() if asyncio._get_running_loop() is not None else None
    if task is not None:
        return f"{_process_prefix()}:task:{id(task)}", thread.name, task.get_name()
    return f"{_process_prefix()}:thread:{threading.get_ident()}", thread.name, None


def new_token() -> str:
    """A token unique to one hold: the owner value of a non-reentrant hold."""
    return f"{_process_prefix()}:{os.urandom(12).hex()}"


def check_owner(owner: Any) -> str | None:
    """Return a valid explicit owner (or None); raise :class:`InvalidArgument` otherwise."""
    if owner is None:
        return None
    if not isinstance(owner, str) or not owner or len(owner) > 256:
        raise InvalidArgument(f"owner must be a non-empty string of <= 256 characters: {owner!r}")
    return owner


def holder_meta(kind: str, owner: str, thread: str, task: str | None, ttl: float) -> str:
    """The holder metadata JSON stored in the admin index (the script appends the fence)."""
    dumps = json.dumps
    return (
        f'{{"kind":"{kind}","owner":{dumps(owner)},"host":{dumps(_host)},'
        f'"pid":{os.getpid()},"thread":{dumps(thread)},"task":{dumps(task)},'
        f'"acquired_at":{time.time():.3f},"ttl":{ttl!r}}}'
    )


class Hold:
    """The state of one hold on the client side: who, which fence, how many times."""

    __slots__ = ("count", "fence", "lost", "owner", "renew_at", "user")

    def __init__(self, owner: str, fence: int, user: str) -> None:
        self.owner = owner
        self.fence = fence
        self.user = user
        self.count = 1
        self.lost = False
        self.renew_at = 0.0
