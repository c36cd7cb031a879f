"""Who holds a lock: owner ids of threads and asyncio tasks, hold tokens and holder metadata.

These run on every acquire and release, so they avoid exceptions, system calls
and object churn: a thread's identity is drawn once per thread (and again
after a fork, which changes the pid inside it), the running loop is looked up
without raising, a token is a per-process random prefix plus a counter, and
the metadata JSON is a cached per-holder prefix plus the time.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import socket
import threading
import time
import weakref
from typing import Any

from ..exceptions import InvalidArgument

_host = socket.gethostname()
#: Bumped in a forked child: every cached identity that embeds the parent's pid is stale.
_generation = 0
_prefix = f"{_host}:{os.getpid()}"
#: Random per process, so tokens never repeat across processes that reuse a pid.
_token_base = f"{_prefix}:{os.urandom(8).hex()}:"
_token_counter = itertools.count(1)
_local = threading.local()
#: The owner token of each live asyncio task (an entry ends with its task).
_task_tokens: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()
#: Metadata prefixes by (kind, thread, task, ttl); cleared when it grows past this many.
_META_CACHE_SIZE = 1024
_meta_cache: dict[tuple[str, str, str | None, float], str] = {}


def _after_fork_in_child() -> None:
    global _generation, _prefix, _token_base, _token_counter
    _generation += 1
    _prefix = f"{_host}:{os.getpid()}"
    _token_base = f"{_prefix}:{os.urandom(8).hex()}:"
    _token_counter = itertools.count(1)
    _meta_cache.clear()


os.register_at_fork(after_in_child=_after_fork_in_child)


def current_user() -> tuple[str, str, str | None]:
    """Return ``(id, thread name, task name)`` of the calling thread or asyncio task.

    The id is a random token drawn once per thread or task (not its ``ident`` or
    ``id()``, which Python reuses once the thread or task has ended), so a new
    thread or task never inherits the reentrant holds or the lock objects of an
    old one. Its ``host:pid`` prefix tells a forked child from its parent.
    """
    if asyncio._get_running_loop() is not None:
        task = asyncio.current_task()
        if task is not None:
            name = threading.current_thread().name
            token = _task_tokens.get(task)
            if token is None or not token.startswith(_prefix + ":"):
                token = f"{_token_base}task{next(_token_counter)}"
                _task_tokens[task] = token
            return token, name, task.get_name()
    cached = getattr(_local, "user", None)
    # the thread's name is read each time: the admin shows it, and a thread may be renamed
    name = threading.current_thread().name
    if cached is None or cached[0] != _generation or cached[1][1] != name:
        ident = cached[1][0] if cached is not None and cached[0] == _generation else None
        ident = ident or f"{_token_base}thread{next(_token_counter)}"
        cached = (_generation, (ident, name, None))
        _local.user = cached
    user: tuple[str, str, str | None] = cached[1]
    return user


def new_token() -> str:
    """A token unique to one hold: the owner value of a non-reentrant hold.

    Unique without a system call per hold: the random part is drawn once per
    process (and again in a forked child), the counter tells holds apart.
    """
    return f"{_token_base}{next(_token_counter)}"


def check_owner(owner: Any) -> str | None:
    """Return a valid explicit owner (or None); raise :class:`InvalidArgument` otherwise."""
    if owner is None:
        return None
    if not isinstance(owner, str) or not owner or len(owner) > 256:
        raise InvalidArgument(f"owner must be a non-empty string of <= 256 characters: {owner!r}")
    return owner


def holder_meta(kind: str, thread: str, task: str | None, ttl: float) -> str:
    """The holder metadata JSON a grant stores in its lock's hash (for the admin).

    The owner and the fence are fields of the hash already. Only the time changes
    between holds of one thread, so the rest is built once per (kind, thread,
    task, ttl) and reused.
    """
    key = (kind, thread, task, ttl)
    head = _meta_cache.get(key)
    if head is None:
        fields: dict[str, Any] = {"kind": kind, "host": _host, "pid": os.getpid()}
        fields.update(thread=thread, task=task, ttl=ttl)
        # the object without its closing brace: each grant appends its own time
        head = json.dumps(fields, separators=(",", ":"))[:-1] + ',"acquired_at":'
        if len(_meta_cache) >= _META_CACHE_SIZE:
            _meta_cache.clear()  # task names are unique per task: keep the cache bounded
        _meta_cache[key] = head
    return f"{head}{time.time():.3f}}}"


class Hold:
    """The state of one hold on the client side: who, which fence, how many times.

    ``levels`` are the request ids of a reentrant object's acquires in this hold, oldest
    first (one per count): each names a level whose own deadline Redis records, so a
    release ends the latest one and an ``extend`` moves only this object's.
    """

    __slots__ = (
        "count",
        "fence",
        "levels",
        "lost",
        "owner",
        "releasing",
        "renew_at",
        "told",
        "user",
    )

    def __init__(self, owner: str, fence: int, user: str) -> None:
        self.owner = owner
        self.fence = fence
        self.user = user
        self.count = 1
        self.levels: list[str] = []
        self.lost = False
        self.releasing = False  # its last release is on its way: the watchdog leaves it
        self.told = False  # its loss was raised by a release already
        self.renew_at = 0.0
