"""The independent masters of a Redlock alias: one client each, run ids and quarantine.

A master that restarted may have forgotten the holds it granted (without
``appendfsync always`` it certainly did). If it counted toward the next quorum
at once, two clients could hold the same lock: the old holder on the masters
that kept its hold, the new one on the forgetful master plus the rest. So, as
the Redlock paper asks, a master whose run id changed is left out of the
quorum for ``MAX_TTL`` seconds, after which every hold it could have forgotten
has expired anyway.

The run id is read on every new connection (a restart always drops the old
ones), by a ``redis_connect_func`` that runs ``INFO server`` right after the
handshake: the check costs nothing on the hot path. A process that first meets
a master cannot know whether it restarted a moment ago; with
``QUARANTINE_FRESH_MASTERS`` it leaves out a master whose uptime is below
``MAX_TTL`` until it is not.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeVar

import redis
import redis.asyncio
from redis.asyncio.retry import Retry as AsyncRetry
from redis.backoff import NoBackoff
from redis.retry import Retry

from ..calls.node import NodeBase
from ..calls.script import Call, script
from ..connections import redact
from ..locking.pipeline import run_scripts
from ..wire import to_text

logger = logging.getLogger("django_redislock.redlock")
T = TypeVar("T")


class Owner(Protocol):
    """What a master reads from its Redlock alias: the name, the options, the key layout."""

    @property
    def alias(self) -> str: ...

    @property
    def options(self) -> dict[str, Any]: ...

    @property
    def key_prefix(self) -> str: ...

    def key(self, tag: str, *parts: str) -> str: ...


def parse_info(raw: Any) -> dict[str, str]:
    """``INFO`` text as a dict of strings."""
    text = to_text(raw)
    pairs = (line.split(":", 1) for line in text.splitlines() if ":" in line)
    return {key.strip(): value.strip() for key, value in pairs}


class Master(NodeBase):
    """One independent master: a node of the call layer (:class:`~..calls.node.NodeBase`).

    It has what the single-server helpers use (``client``, ``errors()``,
    ``options``, ``key()``, ``script()``, ``is_cluster``), so script pipelines,
    index pages and the ``BLPOP`` wait of :mod:`django_redislock.locking` run
    unchanged against one master.
    """

    is_cluster = False

    def __init__(self, backend: Owner, url: str) -> None:
        self.backend = backend
        self.url = url
        self.options: dict[str, Any] = {**backend.options, "CLIENT_CLASS": None, "CLUSTER": False}
        self.run_id: str | None = None
        #: ``time.monotonic()`` from which this master counts toward a quorum.
        self.counted_from = 0.0
        self._lock = threading.Lock()
        self._client: redis.Redis | None = None
        self._scripts = {}
        self._pid = 0
        #: This process's asyncio clients, one per event loop (a client is bound to its loop).
        self._async: dict[int, tuple[asyncio.AbstractEventLoop, Any]] = {}
        self._async_pid = 0

    def __repr__(self) -> str:
        return f"<Master {redact(self.url)}>"

    @property
    def alias(self) -> str:
        """The Redlock alias this master belongs to."""
        return self.backend.alias

    @property
    def key_prefix(self) -> str:  # type: ignore[override]
        """The alias's key prefix: a master stores the keys the alias names."""
        return self.backend.key_prefix

    @property
    def client(self) -> redis.Redis:
        """This process's client for the master: short timeouts, no retries."""
        if self._client is None or self._pid != os.getpid():
            with self._lock:
                if self._client is None or self._pid != os.getpid():
                    self._client = redis.Redis.from_url(self.url, **self._client_kwargs())
                    self._pid = os.getpid()
        return self._client

    def _client_kwargs(self, asynchronous: bool = False) -> dict[str, Any]:
        """The client's settings: short timeouts, no retries, then ``CLIENT_KWARGS``.

        ``CLIENT_KWARGS`` may replace any of them, ``retry`` included (a redis-py
        ``Retry`` is given to the asyncio client as the asyncio ``Retry`` with the
        same backoff, count and errors).
        """
        timeout = self.backend.options["MASTER_TIMEOUT"]
        kwargs: dict[str, Any] = {
            "socket_timeout": timeout,
            "socket_connect_timeout": timeout,
            "retry": AsyncRetry(NoBackoff(), 0) if asynchronous else Retry(NoBackoff(), 0),
            "redis_connect_func": self._on_connect_async if asynchronous else self._on_connect,
            **self.backend.options["CLIENT_KWARGS"],
        }
        retry = kwargs["retry"]
        if asynchronous and isinstance(retry, Retry):
            errors: Any = retry._supported_errors
            kwargs["retry"] = AsyncRetry(retry._backoff, retry._retries, errors)
        return kwargs

    def async_client(self) -> redis.asyncio.Redis:
        """This process's asyncio client for the master on the running event loop.

        Same timeouts and no retries, like :attr:`client`: a master that does not
        answer in ``MASTER_TIMEOUT`` counts as down for this attempt.
        """
        loop = asyncio.get_running_loop()
        with self._lock:
            if self._async_pid != os.getpid():  # a forked child must not use its parent's sockets
                self._async, self._async_pid = {}, os.getpid()
            entry = self._async.get(id(loop))
            if entry is None or entry[0] is not loop:
                for key in [k for k, (other, _) in self._async.items() if other.is_closed()]:
                    del self._async[key]
                client = redis.asyncio.Redis.from_url(self.url, **self._client_kwargs(True))
                entry = self._async[id(loop)] = (loop, client)
        return entry[1]

    async def _on_connect_async(self, connection: Any) -> None:
        """The asyncio twin of :meth:`_on_connect`."""
        try:
            await connection.on_connect()
            await connection.send_command("INFO", "server")
            try:
                raw = await connection.read_response()
            except redis.ResponseError as exc:
                logger.warning(
                    "Redlock master %s refused INFO (%s): its restarts cannot be detected; "
                    "allow INFO for this user",
                    redact(self.url),
                    exc,
                )
                return
            if not isinstance(raw, bytes | str):
                raise TypeError(f"INFO answered with {type(raw).__name__}")
        except (AttributeError, TypeError, ValueError) as exc:
            raise redis.ConnectionError(
                f"{redact(self.url)} is not a Redis server: its handshake failed ({exc!r})"
            ) from exc
        info = parse_info(raw)
        self.seen(info.get("run_id", ""), int(info.get("uptime_in_seconds", "0")))

    def _on_connect(self, connection: Any) -> None:
        """After redis-py's own handshake, read the run id and uptime (one ``INFO``).

        A peer whose replies make no sense is not a Redis server, and its
        connection fails like a refused one. The usual case is a TCP self-connect:
        a client dialling a master that is down on a port of the ephemeral range
        may be given that very port as its own, and then reads every command it
        sends back as the reply.
        """
        try:
            connection.on_connect()
            raw = self._read_info(connection)
        except (AttributeError, TypeError, ValueError) as exc:
            raise redis.ConnectionError(
                f"{redact(self.url)} is not a Redis server: its handshake failed ({exc!r})"
            ) from exc
        if raw is not None:
            info = parse_info(raw)
            self.seen(info.get("run_id", ""), int(info.get("uptime_in_seconds", "0")))

    def _read_info(self, connection: Any) -> bytes | str | None:
        """``INFO server``'s text, or None when this ACL user may not run it."""
        connection.send_command("INFO", "server")
        try:
            raw = connection.read_response()
        except redis.ResponseError as exc:  # e.g. NOPERM: an ACL user without INFO
            logger.warning(
                "Redlock master %s refused INFO (%s): its restarts cannot be detected; allow "
                "INFO for this user",
                redact(self.url),
                exc,
            )
            return None
        if not isinstance(raw, bytes | str):
            raise TypeError(f"INFO answered with {type(raw).__name__}")
        return raw

    def seen(self, run_id: str, uptime: float, now: float | None = None) -> None:
        """Record the run id of a new connection; start a quarantine if it changed."""
        now = time.monotonic() if now is None else now
        quarantine = float(self.backend.options["MAX_TTL"])
        with self._lock:
            if self.run_id is None:
                if self.backend.options["QUARANTINE_FRESH_MASTERS"] and uptime < quarantine:
                    self.counted_from = now + quarantine - uptime
            elif run_id != self.run_id:
                self.counted_from = now + quarantine
                logger.warning(
                    "Redlock master %s restarted (run id %s -> %s): left out of the quorum for %gs",
                    redact(self.url),
                    self.run_id,
                    run_id,
                    quarantine,
                )
            self.run_id = run_id

    def counts(self) -> bool:
        """True when this master's answers count toward a quorum (not quarantined)."""
        return time.monotonic() >= self.counted_from

    def unreachable(self, exc: Exception) -> str:
        return (
            f"Redlock master {redact(self.url)} of REDISLOCK_LOCKS"
            f"[{self.backend.alias!r}] is unreachable ({exc})"
        )

    def run(self, call: Call) -> Any:
        """Run one script on this master; its result, or raise (errors as exceptions)."""
        (result,) = run_scripts(self, [call])
        if isinstance(result, Exception):
            raise result
        return result

    async def run_async(self, call: Call) -> Any:
        """The asyncio twin of :meth:`run`: one ``EVALSHA`` (loading the script if needed).

        Cancelled while the reply is awaited, redis-py closes the connection, so a
        late reply is never read by the next command; whether the script ran is
        then unknown; the Redlock lock avoids that by never cancelling an attempt
        in flight (see :mod:`django_redislock.redlock.lock`).
        """
        name, keys, args = call
        client = self.async_client()
        with self.errors():
            return await script(name).run_async(client, keys, args)

    def reset(self) -> None:
        """Forget the clients (after a settings change); the run id is kept."""
        with self._lock:
            self._client, self._pid, self._async, self._async_pid = None, 0, {}, 0
            self._scripts = {}


class Quorum(Owner, Protocol):
    """A Redlock alias as its lock objects and listings use it: masters and a quorum."""

    masters: list[Master]
    quorum: int

    def each(
        self, func: Callable[[Master], T], masters: list[Master] | None = None
    ) -> list[T | Exception]: ...

    async def each_async(
        self, func: Callable[[Master], Awaitable[T]], masters: list[Master] | None = None
    ) -> list[T | Exception]: ...
