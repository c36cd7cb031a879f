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

import contextlib
from collections.abc import Iterator
from contextlib import AbstractContextManager
from typing import Any, Protocol

from redis.exceptions import (
    ClusterDownError,
    OutOfMemoryError,
    RedisClusterException,
    ResponseError,
    SlotNotCoveredError,
)

from ..connections import CLIENT_ERRORS, AsyncClient, Client
from ..exceptions import ConnectionFailed, ServerOutOfMemory
from .script import BoundScript, script
from .transport import as_connection_error, internal_race

#: What :meth:`NodeBase.errors` turns into ``ConnectionFailed``: the client errors, and
#: ``CLUSTERDOWN`` (a slot whose master is restarting; the command did not run).
OUTAGE_ERRORS: tuple[type[Exception], ...] = (*CLIENT_ERRORS, ClusterDownError)


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
    def client(self) -> Client:
        """This process's blocking redis-py client."""
        ...

    def async_client(self) -> AsyncClient:
        """This process's asyncio client for the running event loop."""
        ...

    def script(self, name: str, client: Client | AsyncClient | None = None) -> BoundScript:
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


def server_busy(exc: ResponseError) -> bool:
    """True for ``BUSY``: the server runs a long script and ran nothing else (not ``BUSYGROUP``)."""
    return str(exc).startswith("BUSY ")


def cluster_unreachable(exc: RedisClusterException) -> bool:
    """True for the cluster client's way of saying no node answered (or a slot has none)."""
    return isinstance(exc, SlotNotCoveredError) or "cannot be connected" in str(exc)


class KeyNames:
    """The key layout of this app, written once: ``<prefix>:{<tag>}:<part>:...``."""

    key_prefix: str

    def key(self, tag: str, *parts: str) -> str:
        """``<prefix>:{<tag>}:<part>:...``: every key of one object shares ``{tag}``.

        The hash tag puts every key one script touches in one Cluster slot.
        """
        return ":".join((f"{self.key_prefix}:{{{tag}}}", *parts))


class NodeBase(KeyNames):
    """Key names, error mapping and bound scripts of a node (the Redis backends, a master).

    A subclass provides ``client`` and :meth:`unreachable` (the message that names
    its setting) and creates ``_scripts`` (a dict) before the first :meth:`script`.
    """

    _scripts: dict[tuple[int, str], BoundScript]

    @property
    def client(self) -> Client:
        raise NotImplementedError

    def unreachable(self, exc: Exception) -> str:
        """The :class:`ConnectionFailed` message for ``exc``: what failed, and which setting."""
        raise NotImplementedError

    @contextlib.contextmanager
    def errors(self) -> Iterator[None]:
        """Turn redis-py connection errors into :class:`ConnectionFailed` naming the setting.

        A cluster error that is not about reaching a node (a script error on a
        cluster, for example) is raised as it is. ``CLUSTERDOWN`` (a master of the slot
        restarting, or the cluster not yet agreeing it is back, after redis-py's own
        retries) is a node out of reach too: the command did not run, and a caller that
        rides out outages (a worker, a buyer trying again) must see the same error. So is
        an asyncio connection closed under a command by another coroutine, which redis-py
        reports as an ``AttributeError`` or ``TypeError`` of its own
        (see :mod:`django_redislock.calls.transport`), or a Cluster client's slot-map reload
        raced by another thread's (a ``RuntimeError`` or ``IndexError`` out of redis-py's
        cluster code, the same module), and a ``BUSY`` reply: a server running
        a script (or function) past ``busy-reply-threshold`` refuses every other command until
        it ends, which redis-py raises as a plain ``ResponseError``; unmapped, it reached a
        view as a 500 and a worker as an error of its loop.
        """
        try:
            yield
        except OutOfMemoryError as exc:
            raise ServerOutOfMemory(
                f"Redis refused the write: it is at its maxmemory ({exc}); nothing was changed. "
                "Free memory (drain or purge queues) or raise maxmemory, then try again"
            ) from exc
        except OUTAGE_ERRORS as exc:
            if isinstance(exc, RedisClusterException) and not cluster_unreachable(exc):
                raise
            raise ConnectionFailed(self.unreachable(exc)) from exc
        except ResponseError as exc:
            if not server_busy(exc):
                raise
            raise ConnectionFailed(self.unreachable(exc)) from exc
        except (AttributeError, TypeError, RuntimeError, IndexError) as exc:
            if not internal_race(exc):
                raise
            error = as_connection_error(exc)
            raise ConnectionFailed(self.unreachable(error)) from error

    def script(self, name: str, client: Client | AsyncClient | None = None) -> BoundScript:
        """The script ``name`` bound to ``client`` (default: the blocking client)."""
        client = self.client if client is None else client
        cache_key = (id(client), name)
        found = self._scripts.get(cache_key)
        if found is None or found.registered_client is not client:
            found = self._scripts[cache_key] = script(name).on(client)
        return found
