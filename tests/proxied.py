"""Fixtures that put a :class:`~tests.faults.FaultProxy` between the app and each real server.

* ``proxied_single``: the session's single server behind one proxy;
* ``proxied_cluster``: each node of the session's 3-master cluster behind its
  own proxy; redis-py's ``address_remap`` (passed through ``CLIENT_KWARGS``)
  sends the cluster client to the proxies of the nodes ``CLUSTER SLOTS`` names;
* ``proxied_redlock``: 3 of the session's Redlock masters, each behind a proxy;
* ``proxied_target``: parametrized over the three.

Each gives a :class:`ProxiedTarget`: backends built through the proxies with a
short ``SOCKET_TIMEOUT`` (``MASTER_TIMEOUT`` for Redlock), the proxies to
inject faults with, and raw clients that reach the servers directly for
assertions. The servers are flushed first; the proxies are closed (threads
joined, connections reset) at teardown.

``resend_options(kind)`` are the OPTIONS of a client that resends a command
after a timeout or a dropped connection (the case a request id must make
harmless): an explicit redis-py ``Retry`` for a single server, the cluster
client's own default retries for the cluster.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from django_redislock.backends.redis import RedisLockBackend, RedisQueueBackend
from django_redislock.backends.redlock import RedlockBackend

from .faults import Direction, Fault, FaultProxy, Matcher
from .servers import RedisProcess

#: Socket timeout of clients behind a proxy: short, so a silent fault costs little,
#: but well above a loaded machine's normal reply time.
PROXY_SOCKET_TIMEOUT = 0.5
#: Socket timeout for tests whose faults all cut the connection (none leaves the client
#: waiting on a silent one): no call of theirs should ever reach it, so it is the library's
#: default. With 0.5 s, healthy replies through the proxy timed out on a loaded machine
#: (load 20 on 2 cores) and these tests failed for a fault they never armed.
CUT_SOCKET_TIMEOUT = 5.0
#: Socket timeout for tests that must see a call resolved after silent faults (a lost reply,
#: a swallowed handshake): each silent fault costs one of it, and no healthy reply may come
#: near it on a loaded machine, where the 0.5 s above has been reached.
RESOLVE_SOCKET_TIMEOUT = 1.0
PROXIED_KINDS = ("single", "cluster", "redlock")
REDLOCK_MASTERS = 3


def no_retry() -> Retry:
    return Retry(NoBackoff(), 0)


def resend_options(kind: str) -> dict[str, Any]:
    """OPTIONS of a client that resends a command once after a lost reply.

    Single server: a redis-py ``Retry`` (one resend, no backoff) in
    ``CLIENT_KWARGS``. Cluster: ``RedisCluster``'s default retries, left as they
    are. Redlock: a ``Retry`` in ``CLIENT_KWARGS`` too, which each master's client takes
    in place of its no-retry default.
    """
    if kind in ("single", "redlock"):
        return {"CLIENT_KWARGS": {"retry": Retry(NoBackoff(), 1)}}
    return {}


def cuts_only(kind: str) -> dict[str, Any]:
    """OPTIONS for a test whose faults all cut the connection: the long socket timeout.

    Not for Redlock: its ``MASTER_TIMEOUT`` must stay far below the TTL (a slow master
    eats the grant's validity), so its cases keep :data:`PROXY_SOCKET_TIMEOUT`.
    """
    return {} if kind == "redlock" else {"SOCKET_TIMEOUT": CUT_SOCKET_TIMEOUT}


def no_resend_options(kind: str) -> dict[str, Any]:
    """OPTIONS of a client that never resends (Redlock masters never do anyway)."""
    if kind in ("single", "cluster"):
        return {"CLIENT_KWARGS": {"retry": no_retry()}}
    return {}


@dataclass
class ProxiedTarget:
    """A server kind reached through fault proxies, and direct clients to check the truth."""

    kind: str
    proxies: list[FaultProxy]
    servers: list[RedisProcess]
    options: dict[str, Any] = field(default_factory=dict)
    prefix: str = ""
    _backends: list[Any] = field(default_factory=list)
    _raw: Any = None

    @property
    def proxy(self) -> FaultProxy:
        """The first (for a single server: the only) proxy."""
        return self.proxies[0]

    def raw_clients(self) -> list[redis.Redis]:
        """A direct client per server (cluster: per node; Redlock: per master)."""
        return [server.client() for server in self.servers]

    def raw(self) -> Any:
        """One direct client that reaches every key: a RedisCluster for the cluster."""
        if self._raw is None:
            if self.kind == "cluster":
                self._raw = redis.RedisCluster(host="127.0.0.1", port=self.servers[0].port)
            else:
                self._raw = self.servers[0].client()
        return self._raw

    def _client_kwargs(self, options: dict[str, Any]) -> dict[str, Any]:
        kwargs = dict(self.options.get("CLIENT_KWARGS", {}))
        kwargs.update(options.pop("CLIENT_KWARGS", {}))
        return kwargs

    def params(self, **options: Any) -> dict[str, Any]:
        kwargs = self._client_kwargs(options)
        opts = {**self.options, **options, "CLIENT_KWARGS": kwargs}
        if self.kind == "redlock":
            location: Any = [proxy.url for proxy in self.proxies]
        else:
            location = self.proxy.url
        return {"LOCATION": location, "KEY_PREFIX": self.prefix, "OPTIONS": opts}

    def lock_backend(self, alias: str = "faults", **options: Any) -> Any:
        """A lock backend through the proxies (``options`` override the OPTIONS)."""
        backend: Any
        if self.kind == "redlock":
            backend = RedlockBackend(alias, self.params(**options))
        else:
            backend = RedisLockBackend(alias, self.params(**options))
        self._backends.append(backend)
        return backend

    def queue_backend(self, alias: str = "faults", **options: Any) -> RedisQueueBackend:
        if self.kind == "redlock":
            raise ValueError("queues do not run on Redlock")
        backend = RedisQueueBackend(alias, self.params(**options))
        self._backends.append(backend)
        return backend

    # ---- faults on every proxy at once ------------------------------------------------

    def drop_reply(
        self, match: Matcher = None, *, times: int = 1, then: Literal["cut", "silent"] = "cut"
    ) -> list[Fault]:
        return [proxy.drop_reply(match, times=times, then=then) for proxy in self.proxies]

    def cut_mid_reply(self, match: Matcher = None, *, times: int = 1) -> list[Fault]:
        return [proxy.cut_mid_reply(match, times=times) for proxy in self.proxies]

    def stall_on(
        self, seconds: float, match: Matcher = None, *, direction: Direction = "down"
    ) -> list[Fault]:
        return [proxy.stall_on(seconds, match, direction=direction) for proxy in self.proxies]

    def stall(self, seconds: float, direction: Direction = "both") -> None:
        for proxy in self.proxies:
            proxy.stall(seconds, direction)

    def cut_all(self) -> int:
        return sum(proxy.cut_all() for proxy in self.proxies)

    def cut_once_sent(self, command: str, settle: float = 0.05) -> int:
        """Cut every connection once ``command`` went through (within 5 s), then ``settle`` s.

        For a blocking command sent by another thread: the pause lets the server block
        it before the cut. Returns how many connections were cut.
        """
        deadline = time.monotonic() + 5
        while self.count(command) == 0 and time.monotonic() < deadline:
            time.sleep(0.005)
        time.sleep(settle)
        return self.cut_all()

    def clear(self) -> None:
        for proxy in self.proxies:
            proxy.clear()

    def count(self, match: Matcher = None) -> int:
        return sum(proxy.count(match) for proxy in self.proxies)

    def close(self) -> None:
        for backend in self._backends:
            close: Callable[[], None] | None = getattr(backend, "close", None)
            if close is not None:
                close()
        for proxy in self.proxies:
            proxy.close()
        if self._raw is not None:
            self._raw.close()


def _proxies(servers: list[RedisProcess]) -> list[FaultProxy]:
    proxies: list[FaultProxy] = []
    try:
        for server in servers:
            proxies.append(FaultProxy(("127.0.0.1", server.port)).start())
    except BaseException:
        for proxy in proxies:
            proxy.close()
        raise
    return proxies


def _remap(servers: list[RedisProcess], proxies: list[FaultProxy]) -> Any:
    ports = {server.port: proxy.port for server, proxy in zip(servers, proxies, strict=True)}

    def remap(address: tuple[str, int]) -> tuple[str, int]:
        host, port = address
        return (host, ports.get(port, port))

    return remap


def make_proxied(kind: str, servers: list[RedisProcess]) -> ProxiedTarget:
    """Proxies in front of ``servers`` (flushed) and a :class:`ProxiedTarget` for ``kind``."""
    for server in servers:
        server.client().flushall()
    proxies = _proxies(servers)
    prefix = f"flt{uuid.uuid4().hex[:8]}"
    options: dict[str, Any] = {"SOCKET_TIMEOUT": PROXY_SOCKET_TIMEOUT}
    if kind == "cluster":
        ports = {server.port: proxy.port for server, proxy in zip(servers, proxies, strict=True)}
        for proxy in proxies:
            proxy.port_map = ports
        options["CLUSTER"] = True
        options["CLIENT_KWARGS"] = {"address_remap": _remap(servers, proxies)}
    if kind == "redlock":
        options = {"MASTER_TIMEOUT": PROXY_SOCKET_TIMEOUT, "QUARANTINE_FRESH_MASTERS": False}
    return ProxiedTarget(kind, proxies, servers, options, prefix)


@pytest.fixture
def proxied_single(redis_server: RedisProcess) -> Iterator[ProxiedTarget]:
    target = make_proxied("single", [redis_server])
    yield target
    target.close()


@pytest.fixture
def proxied_cluster(redis_cluster: list[RedisProcess]) -> Iterator[ProxiedTarget]:
    target = make_proxied("cluster", redis_cluster)
    yield target
    target.close()


@pytest.fixture
def proxied_redlock(redlock_servers: list[RedisProcess]) -> Iterator[ProxiedTarget]:
    target = make_proxied("redlock", redlock_servers[:REDLOCK_MASTERS])
    yield target
    target.close()


@pytest.fixture(params=PROXIED_KINDS)
def proxied_target(request: pytest.FixtureRequest) -> ProxiedTarget:
    """The fault contract fixture: single server, cluster and Redlock, each behind proxies."""
    target: ProxiedTarget = request.getfixturevalue(f"proxied_{request.param}")
    return target
