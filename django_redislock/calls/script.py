"""One object per Lua script, and the one place that handles ``NOSCRIPT``.

Every script call of the app goes through a :class:`Script`: :meth:`Script.run`
(a blocking client), :meth:`Script.run_async` (an asyncio client),
:meth:`Script.prepare` (a hot call whose keys do not change, see
:class:`Prepared`) or :class:`~django_redislock.calls.batch.Batch` (many calls in
one pipeline). Each sends ``EVALSHA``; a server that does not know the script
(a new or restarted server, ``SCRIPT FLUSH``, a failover to a replica that never
saw it) answers ``NOSCRIPT`` *without running anything*, so loading the source
and sending the same call once more is always safe: the call runs at most once.

What a timeout, a resend or a cancellation leave behind is the script's own
business (the scripts that must be safe to resend carry a request key, see
``docs/calls.md``); this module adds no state on the server beyond the script
cache that ``SCRIPT LOAD`` fills.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Sequence
from functools import cache
from typing import Any, cast

import redis
import redis.asyncio

from ..connections import AsyncClient, Client
from ..scripts import source
from .direct import DirectSender, direct_sender
from .transport import as_connection_error, closed_under_send
from .values import Arg, Key, Reply

#: One script call: the script's name, its KEYS and its ARGV.
Call = tuple[str, list[str], list[Any]]

NoScriptError = redis.exceptions.NoScriptError
ASYNC_CLIENTS = (redis.asyncio.Redis, redis.asyncio.RedisCluster)


#: Loads tried after ``NOSCRIPT`` before the error is raised (each ``NOSCRIPT`` ran nothing).
RELOADS = 3
#: Sends of an asyncio call after one whose connection was closed under it (see
#: :mod:`.transport`) before it fails as a dropped connection.
ASYNC_RESENDS = 3


class Script:
    """A Lua script of this app (``scripts/<name>.lua``): its source, its SHA1, its calls."""

    __slots__ = ("name", "script", "sha")

    def __init__(self, name: str) -> None:
        self.name = name
        #: the Lua source, includes expanded (the attribute name redis-py's ``Script`` uses)
        self.script = source(name)
        self.sha = hashlib.sha1(self.script.encode()).hexdigest()

    def __repr__(self) -> str:
        return f"<Script {self.name} {self.sha[:8]}>"

    def args(self, keys: Sequence[Key], args: Sequence[Arg]) -> tuple[Arg, ...]:
        """The whole ``EVALSHA`` command of one call."""
        return ("EVALSHA", self.sha, len(keys), *keys, *args)

    def run(self, client: Client, keys: Sequence[Key] = (), args: Sequence[Arg] = ()) -> Reply:
        """Run the script on a blocking client; its reply (an error reply is raised)."""
        sender: Any = client  # RedisCluster.execute_command is untyped
        try:
            return sender.execute_command("EVALSHA", self.sha, len(keys), *keys, *args)
        except NoScriptError:
            return self.reloaded(client, keys, args)

    def load(self, client: Client) -> None:
        """Load the source into the server's script cache (every primary of a Cluster)."""
        client.script_load(self.script)

    def reloaded(self, client: Client, keys: Sequence[Key], args: Sequence[Arg]) -> Reply:
        """After ``NOSCRIPT`` (nothing ran): load the script, then send the call again.

        The server can forget the script again between the load and the call (a
        ``SCRIPT FLUSH``, a restart, on a cluster a load that reached other nodes than
        the call): that ``NOSCRIPT`` ran nothing either, so up to :data:`RELOADS` loads
        are tried before it is raised.
        """
        sender: Any = client  # RedisCluster.execute_command is untyped
        for attempt in range(RELOADS):
            self.load(client)
            try:
                return sender.execute_command("EVALSHA", self.sha, len(keys), *keys, *args)
            except NoScriptError:
                if attempt == RELOADS - 1:
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    async def run_async(
        self, client: AsyncClient, keys: Sequence[Key] = (), args: Sequence[Arg] = ()
    ) -> Reply:
        """The asyncio twin of :meth:`run`.

        Cancelled while the reply is awaited, redis-py drops the connection, so a
        late reply is never read by another command; whether the script ran is then
        unknown, as after a timeout (the caller's request key, if any, settles it).

        A connection closed under the send by another coroutine (redis-py raises
        ``AttributeError`` or ``TypeError`` for it, see :mod:`.transport`) is a dropped
        connection: the same request goes out again, up to :data:`ASYNC_RESENDS` times, as
        redis-py resends a command after a connection error (the scripts that change state
        are safe to resend: a request key, or the same effect twice; ``docs/calls.md``).
        redis-py takes or opens another connection for it. If every send finds its
        connection closed, the call fails as a dropped connection does: a
        ``redis.ConnectionError``, which the node maps to ``ConnectionFailed``.
        """
        error: Exception | None = None
        for attempt in range(1 + ASYNC_RESENDS):
            if attempt:
                await asyncio.sleep(0)  # the coroutine that closed it finishes its disconnect
            try:
                return await self._sent_async(client, keys, args)
            except (AttributeError, TypeError) as exc:
                if not closed_under_send(exc):
                    raise
                error = exc
        assert error is not None
        raise as_connection_error(error) from error

    async def _sent_async(
        self, client: AsyncClient, keys: Sequence[Key], args: Sequence[Arg]
    ) -> Reply:
        """One send; after ``NOSCRIPT`` (nothing ran) the script is loaded and sent again,
        as in :meth:`reloaded` (the server may forget it again)."""
        for attempt in range(1 + RELOADS):
            if attempt:
                await client.script_load(self.script)
            try:
                return await client.execute_command("EVALSHA", self.sha, len(keys), *keys, *args)
            except NoScriptError:
                if attempt == RELOADS:
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    def prepare(
        self, client: Client, keys: Sequence[Key], direct: bool = True, extra_keys: int = 0
    ) -> Prepared:
        """A :class:`Prepared` call of this script with ``keys`` on the blocking ``client``.

        ``direct=False`` keeps it on redis-py's ``execute_command`` (``OPTIONS['DIRECT_SENDER']``);
        ``extra_keys`` more keys, which change from call to call (a request key), lead each
        call's arguments.
        """
        return Prepared(self, client, list(keys), direct, extra_keys)

    def on(self, client: Client | AsyncClient) -> BoundScript:
        """This script bound to ``client`` (callable like redis-py's ``Script``)."""
        return BoundScript(self, client)


@cache
def script(name: str) -> Script:
    """The :class:`Script` called ``name`` (one object per name and process)."""
    return Script(name)


def sha_of(name: str) -> str:
    """The SHA1 under which Redis caches the script ``name``."""
    return script(name).sha


class BoundScript:
    """A script and the client it runs on, as a node's ``script(name, client)`` returns it.

    Called with ``keys`` and ``args`` it runs the script, like redis-py's
    ``Script``: on a blocking client it returns the reply, on an asyncio client an
    awaitable of it.
    """

    __slots__ = ("is_async", "registered_client", "source")

    def __init__(self, source: Script, client: Client | AsyncClient) -> None:
        self.source = source
        self.registered_client = client
        self.is_async = isinstance(client, ASYNC_CLIENTS)

    @property
    def sha(self) -> str:
        return self.source.sha

    @property
    def script(self) -> str:
        """The Lua source."""
        return self.source.script

    def __call__(self, keys: Sequence[Key] = (), args: Sequence[Arg] = ()) -> Reply:
        client: Any = self.registered_client  # is_async says which kind it is
        if self.is_async:
            return self.source.run_async(client, keys, args)
        return self.source.run(client, keys, args)


class Prepared:
    """A hot call: one script with fixed keys on one blocking client; only ARGV varies.

    With ``extra_keys``, each call's arguments start with that many more keys (keys
    that change from call to call, such as a request key); the rest is ARGV.
    The ``EVALSHA`` head (sha, key count, fixed keys) is built once, and packed once
    for a :class:`~django_redislock.calls.direct.DirectSender` where
    :func:`~django_redislock.calls.direct.direct_pool` allows one for the client (a plain
    ``redis.Redis`` on a standard pool) and ``direct`` is true; other calls go
    through redis-py's ``execute_command``.
    """

    __slots__ = ("client", "extra_keys", "head", "keys", "script", "sender")

    def __init__(
        self,
        source: Script,
        client: Client,
        keys: list[Key],
        direct: bool = True,
        extra_keys: int = 0,
    ) -> None:
        self.script = source
        self.client = client
        self.keys = keys
        self.extra_keys = extra_keys
        self.head = ("EVALSHA", source.sha, len(keys) + extra_keys, *keys)
        self.sender: DirectSender | None = direct_sender(client, self.head) if direct else None

    def __call__(self, args: Sequence[Arg]) -> Reply:
        """Run the call with ``args`` as ARGV; the reply (an error reply is raised)."""
        try:
            sender = self.sender
            if sender is not None:
                return sender.call(args)
            # looked up per call, not bound once: whatever wraps the client's
            # execute_command later (instrumentation, a test's fault) still sees the call
            client: Any = self.client  # RedisCluster.execute_command is untyped
            return client.execute_command(*self.head, *args)
        except NoScriptError:
            return self.reloaded(args)

    def reloaded(self, args: Sequence[Arg]) -> Reply:
        """The call with ``args`` after ``NOSCRIPT`` (nothing ran): see :meth:`Script.reloaded`."""
        extra = self.extra_keys
        keys: list[Key] = [*self.keys, *(cast(Key, key) for key in args[:extra])]
        return self.script.reloaded(self.client, keys, args[extra:])
