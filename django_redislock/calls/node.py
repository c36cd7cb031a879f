"""What the call layer needs from a Redis node: a backend alias or one Redlock master.

A node owns its clients (one blocking client per process, one asyncio client
per event loop), builds its key names, maps client errors to
:class:`~django_redislock.exceptions.ConnectionFailed` naming the setting, and
hands out its scripts bound to a client. The lock objects, the index pages, the
queue calls and the Redlock fan-out take a :class:`Node` (or a
:class:`Backend`, which adds the alias) rather than a concrete class, so the
same code runs on the Redis backends and on each Redlock master.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any, Protocol


class Keys(Protocol):
    """Anything that builds this app's key names (a node, a Redlock alias)."""

    def key(self, tag: str, *parts: str) -> str:
        """``<prefix>:{<tag>}:<part>:...``: every key of one object shares its hash tag."""
        ...


class Node(Keys, Protocol):
    """One Redis deployment the call layer can send commands and scripts to."""

    @property
    def options(self) -> dict[str, Any]:
        """The alias's ``OPTIONS`` with defaults filled in."""
        ...

    @property
    def is_cluster(self) -> bool:
        """True when the client is a ``RedisCluster`` (one slot per script call)."""
        ...

    @property
    def client(self) -> Any:
        """This process's blocking redis-py client."""
        ...

    def async_client(self) -> Any:
        """This process's asyncio client for the running event loop."""
        ...

    def script(self, name: str, client: Any = None) -> Any:
        """The script ``name`` bound to ``client`` (default: the blocking client)."""
        ...

    def errors(self) -> AbstractContextManager[None]:
        """A context that turns client connection errors into ``ConnectionFailed``."""
        ...


class Backend(Node, Protocol):
    """A node that is a configured alias (the lock objects name it in signals and errors)."""

    @property
    def alias(self) -> str:
        """The alias's name in ``REDISLOCK_LOCKS`` or ``REDISLOCK_QUEUES``."""
        ...
