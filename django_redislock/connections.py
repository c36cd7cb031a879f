"""The one place that turns ``LOCATION`` + ``OPTIONS`` into redis-py clients.

Supported locations::

    redis://[[user]:password@]host[:port][/db]     TCP
    rediss://...                                     TLS
    unix:///path/to/redis.sock[?db=0]                Unix socket
    cache://ALIAS                                    reuse a django-redis or Django RedisCache alias
    embedded://PATH                                  a private server for PATH (see embedded.py)

and, as ``OPTIONS``: ``CLUSTER`` (RedisCluster), ``SENTINELS`` (Sentinel; the
host of ``LOCATION`` is the service name) and ``CLIENT_CLASS`` (for example
``"fakeredis.FakeRedis"``).

Clients are built lazily by the backends and cached per process (see
:class:`ClientCache`), so a forked worker never shares a socket with its parent.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast
from urllib.parse import urlsplit

import redis
import redis.asyncio
from django.utils.module_loading import import_string

from .exceptions import ConfigurationError, MissingDependency

#: What redis-py raises when a server, or every node of a cluster, may be unreachable.
#: ``RedisBackendMixin.errors()`` tells which of them are (a cluster error that is not about
#: reaching a node is re-raised as is) and turns those into ``ConnectionFailed``.
CLIENT_ERRORS: tuple[type[Exception], ...] = (
    redis.ConnectionError,
    redis.TimeoutError,
    redis.exceptions.RedisClusterException,
)

#: What a hot call path (a plain ``try``, not ``errors()``) hands to ``errors()``: the client
#: errors, and the error replies ``errors()`` sorts: ``CLUSTERDOWN`` and ``BUSY`` (the command
#: did not run: turned into ``ConnectionFailed``), Redis refusing a write at ``maxmemory``
#: (turned into :class:`~.exceptions.ServerOutOfMemory`); any other error reply is raised as
#: it is. ``RuntimeError`` and ``IndexError`` too: out of a Cluster client's slot-map reload
#: that another thread's raced, they are a dropped connection (``calls/transport.py``).
ROUTED_ERRORS: tuple[type[Exception], ...] = (
    *CLIENT_ERRORS,
    redis.exceptions.ResponseError,
    RuntimeError,
    IndexError,
)

SCHEMES = ("redis", "rediss", "unix", "cache", "embedded")

#: A blocking client: ``redis.Redis`` (a ``CLIENT_CLASS`` such as fakeredis's subclasses it),
#: or ``RedisCluster``.
Client = redis.Redis | redis.RedisCluster
#: An asyncio client, likewise.
AsyncClient = redis.asyncio.Redis | redis.asyncio.RedisCluster


def location_errors(location: Any, options: Mapping[str, Any]) -> list[str]:
    """Return what is wrong with ``location`` without any network I/O."""
    if isinstance(location, (list, tuple)):
        if not location:
            return ["LOCATION is an empty list"]
        if not options.get("CLUSTER"):
            return [
                "LOCATION is a list, which only makes sense with OPTIONS['CLUSTER'] = True "
                "(or the Redlock backend)"
            ]
        return [error for item in location for error in location_errors(item, {})]
    if not isinstance(location, str) or not location:
        return [f"LOCATION must be a URL string, got {location!r}"]
    parts = urlsplit(location)
    if parts.scheme not in SCHEMES:
        return [
            f"LOCATION {location!r} has an unsupported scheme; use one of "
            + ", ".join(f"{s}://" for s in SCHEMES)
        ]
    if parts.scheme in ("redis", "rediss"):
        return _tcp_errors(location, parts)
    if parts.scheme == "unix" and not parts.path:
        return [f"LOCATION {location!r} names no socket path"]
    if parts.scheme == "cache" and not parts.netloc:
        return [f"LOCATION {location!r} names no cache alias (use cache://default)"]
    if parts.scheme == "embedded" and not embedded_path(location):
        return [f"LOCATION {location!r} names no directory (use embedded:///abs/path)"]
    return []


def _tcp_errors(location: str, parts: Any) -> list[str]:
    if not parts.hostname:
        return [f"LOCATION {location!r} names no host"]
    try:
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError:
        return [f"LOCATION {location!r} has a bad port"]
    db = parts.path.strip("/")
    if db and not db.isdigit():
        return [f"LOCATION {location!r} has a bad database number {db!r}"]
    return []


def embedded_path(location: str) -> str:
    """Return the directory of an ``embedded://PATH`` location, made absolute."""
    path = location[len("embedded://") :]
    return os.path.abspath(path) if path else ""


def redact(location: Any) -> str:
    """Return ``location`` with any password replaced, for error messages."""
    if not isinstance(location, str):
        return ", ".join(redact(item) for item in location)
    parts = urlsplit(location)
    if parts.password:
        return location.replace(f":{parts.password}@", ":***@", 1)
    return location


def _pool_kwargs(options: Mapping[str, Any]) -> dict[str, Any]:
    kwargs: dict[str, Any] = {
        "socket_timeout": options["SOCKET_TIMEOUT"],
        "socket_connect_timeout": options["SOCKET_CONNECT_TIMEOUT"],
        "health_check_interval": options["HEALTH_CHECK_INTERVAL"],
    }
    if options["MAX_CONNECTIONS"] is not None:
        kwargs["max_connections"] = options["MAX_CONNECTIONS"]
    client_kwargs = options["CLIENT_KWARGS"]
    if _redis_py_version() >= DRIVER_INFO_SINCE and not DRIVER_KEYS & set(client_kwargs):
        from redis.driver_info import DriverInfo

        kwargs["driver_info"] = DriverInfo(lib_version=redis.__version__)
    kwargs.update(client_kwargs)
    return kwargs


#: The redis-py version whose clients (blocking, asyncio, cluster, sentinel) all take
#: ``driver_info``. Given one, a pool's connections skip redis-py's lookup of its own
#: version in the package metadata, which it otherwise makes for every connection it
#: creates (about 2 ms each; a forked worker pays it for each of its first connections);
#: ``CLIENT SETINFO`` sends the same name and version either way.
DRIVER_INFO_SINCE = (8, 1)
#: Keys of ``CLIENT_KWARGS`` that name the driver: given one, redis-py's own handling stays.
DRIVER_KEYS = frozenset({"driver_info", "lib_name", "lib_version"})


def _redis_py_version() -> tuple[int, ...]:
    """redis-py's major and minor version (0 for a part that is not a number)."""
    parts = redis.__version__.split(".")[:2]
    return tuple(int(part) if part.isdigit() else 0 for part in parts)


def create_client(location: Any, options: Mapping[str, Any]) -> Client:
    """Build a blocking client for ``location``; ``options`` must carry every default."""
    return cast(Client, _build(location, options, asynchronous=False))


def create_async_client(location: Any, options: Mapping[str, Any]) -> AsyncClient:
    """Build an asyncio client for ``location`` (bound to the running event loop)."""
    return cast(AsyncClient, _build(location, options, asynchronous=True))


def _build(location: Any, options: Mapping[str, Any], *, asynchronous: bool) -> Any:
    if options["CLIENT_CLASS"] is not None:
        return _custom_client(location, options, asynchronous)
    if options["CLUSTER"]:
        return _cluster_client(location, options, asynchronous)
    if options["SENTINELS"]:
        return _sentinel_client(location, options, asynchronous)
    scheme = urlsplit(location).scheme
    module: Any = redis.asyncio if asynchronous else redis
    if scheme == "cache":
        return _cache_client(location, asynchronous)
    if scheme == "embedded":
        from .embedded import ensure_server

        socket_path = ensure_server(embedded_path(location))
        return module.Redis(unix_socket_path=socket_path, **_pool_kwargs(options))
    kwargs = _pool_kwargs(options)
    if scheme == "unix":
        kwargs.pop("socket_connect_timeout", None)
    return module.Redis.from_url(location, **kwargs)


def _custom_client(location: Any, options: Mapping[str, Any], asynchronous: bool) -> Any:
    path = options["CLIENT_CLASS"]
    if asynchronous:
        path = _ASYNC_TWINS.get(path, path)
    cls = _import(path, "OPTIONS['CLIENT_CLASS']")
    url = location if isinstance(location, str) and "://" in location else "redis://localhost/0"
    if urlsplit(url).scheme not in ("redis", "rediss", "unix"):
        url = "redis://" + urlsplit(url).netloc.replace("/", "_") + "/0"
    return cls.from_url(url, **options["CLIENT_KWARGS"])


_ASYNC_TWINS = {
    "fakeredis.FakeRedis": "fakeredis.FakeAsyncRedis",
    "fakeredis.FakeStrictRedis": "fakeredis.FakeAsyncRedis",
}


def _cluster_client(location: Any, options: Mapping[str, Any], asynchronous: bool) -> Any:
    module: Any = redis.asyncio.cluster if asynchronous else redis.cluster
    urls = [location] if isinstance(location, str) else list(location)
    nodes = [module.ClusterNode(urlsplit(u).hostname, urlsplit(u).port or 6379) for u in urls]
    kwargs = _pool_kwargs(options)
    kwargs.pop("health_check_interval", None)
    if not asynchronous:
        kwargs.pop("max_connections", None)
    first = urlsplit(urls[0])
    if first.password:
        kwargs.setdefault("password", first.password)
    if first.scheme == "rediss":
        kwargs.setdefault("ssl", True)
    return module.RedisCluster(startup_nodes=nodes, **kwargs)


def _sentinel_client(location: Any, options: Mapping[str, Any], asynchronous: bool) -> Any:
    module: Any = redis.asyncio.sentinel if asynchronous else redis.sentinel
    parts = urlsplit(location)
    sentinels = [_host_port(item) for item in options["SENTINELS"]]
    sentinel = module.Sentinel(
        sentinels,
        sentinel_kwargs=dict(options["SENTINEL_KWARGS"]),
        socket_timeout=options["SOCKET_TIMEOUT"],
        socket_connect_timeout=options["SOCKET_CONNECT_TIMEOUT"],
    )
    kwargs = _pool_kwargs(options)
    db = parts.path.strip("/")
    return sentinel.master_for(
        parts.hostname,
        db=int(db or 0),
        password=parts.password,
        ssl=parts.scheme == "rediss",
        **kwargs,
    )


def _host_port(item: str | Sequence[Any]) -> tuple[str, int]:
    if isinstance(item, str):
        host, _, port = item.rpartition(":")
        return host, int(port)
    return str(item[0]), int(item[1])


def _cache_client(location: str, asynchronous: bool) -> Any:
    from django.conf import settings
    from django.core.cache import caches

    alias = urlsplit(location).netloc
    if alias not in settings.CACHES:
        raise ConfigurationError(
            f"LOCATION {location!r} names the cache alias {alias!r}, "
            f"which is not in settings.CACHES"
        )
    client = _sync_client_of_cache(alias, caches[alias])
    if not asynchronous:
        return client
    return _async_twin(client.connection_pool)


#: Connection settings that carry over from a cache's sync pool to an asyncio client.
_PORTABLE = (
    "host",
    "port",
    "db",
    "username",
    "password",
    "socket_timeout",
    "socket_connect_timeout",
    "client_name",
)


def _async_twin(pool: Any) -> AsyncClient:
    kwargs = {
        k: v for k, v in pool.connection_kwargs.items() if k in _PORTABLE or k.startswith("ssl_")
    }
    if "path" in pool.connection_kwargs:
        kwargs["unix_socket_path"] = pool.connection_kwargs["path"]
    if pool.connection_class.__name__ == "SSLConnection":
        kwargs["ssl"] = True
    return redis.asyncio.Redis(**kwargs)


def _sync_client_of_cache(alias: str, cache: Any) -> Any:
    backend = f"{type(cache).__module__}.{type(cache).__name__}"
    if backend.startswith("django_redis."):
        from django_redis import get_redis_connection

        return get_redis_connection(alias, write=True)
    if backend == "django.core.cache.backends.redis.RedisCache":
        return cache._cache.get_client(write=True)
    raise ConfigurationError(
        f"cache://{alias} must name a django-redis or django.core.cache.backends.redis.RedisCache "
        f"cache; CACHES[{alias!r}] uses {backend}"
    )


def _import(path: Any, setting: str) -> Any:
    if isinstance(path, type):
        return path
    try:
        return import_string(path)
    except ImportError as exc:
        extra = "fakeredis" if path.startswith("fakeredis") else None
        hint = f"; install it with pip install 'django-redislock[{extra}]'" if extra else ""
        raise MissingDependency(f"{setting} = {path!r} cannot be imported: {exc}{hint}") from exc


#: How many times this process is a forked child of a process that imported this module.
_forks = 0


def _count_fork() -> None:
    global _forks
    _forks += 1


def fork_generation() -> int:
    """Changes in a forked child: what a process cached before a fork is its parent's."""
    return _forks


os.register_at_fork(after_in_child=_count_fork)


class ClientCache:
    """Holds one client per process for one alias, rebuilt after ``fork()``.

    redis-py pools already discard inherited sockets after a fork; keying on the
    pid as well means that a child never even shares the client object (a
    cluster client's node table, a sentinel's state) with its parent. Async
    clients are kept per event loop because redis.asyncio connections belong
    to the loop that opened them.
    """

    def __init__(self, factory: Callable[[bool], Client | AsyncClient]) -> None:
        #: ``factory(asynchronous)`` builds a blocking client, or an asyncio one
        self._factory = factory
        self._lock = threading.Lock()
        self._pid = 0
        self._generation = -1
        self._client: Client | None = None
        self._async: dict[int, tuple[Any, AsyncClient]] = {}

    def get(self) -> Client:
        if self._generation != _forks or self._client is None:  # no getpid() per call
            with self._lock:
                if self._pid != os.getpid() or self._client is None:
                    self._async = {}
                    self._client = cast(Client, self._factory(False))
                    self._pid = os.getpid()
                self._generation = _forks
        return self._client

    def get_async(self) -> AsyncClient:
        import asyncio

        loop = asyncio.get_running_loop()
        if self._pid != os.getpid():
            self.get()
        entry = self._async.get(id(loop))
        if entry is None or entry[0] is not loop:
            for key in [k for k, (other, _) in self._async.items() if other.is_closed()]:
                del self._async[key]
            entry = (loop, cast(AsyncClient, self._factory(True)))
            self._async[id(loop)] = entry
        return entry[1]

    def reset(self) -> None:
        """Forget the clients (after a settings change); open sockets close when collected."""
        with self._lock:
            self._client, self._pid, self._generation, self._async = None, 0, -1, {}
