"""The ``locks`` / ``queues`` handlers: lazy settings, aliases, errors, resets."""

from __future__ import annotations

import os
import threading

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from django_redislock import locks, queues
from django_redislock.backends.redis import RedisLockBackend, RedisQueueBackend
from django_redislock.conf import DEFAULT_LOCATION
from django_redislock.exceptions import ConnectionFailed, InvalidLockBackend, InvalidQueueBackend
from django_redislock.handlers import LockHandler

from .servers import RedisProcess


def test_default_alias_reads_the_settings(redis_server: RedisProcess) -> None:
    backend = locks["default"]
    assert isinstance(backend, RedisLockBackend)
    assert backend.location == redis_server.url
    assert backend.key_prefix == "test"
    assert isinstance(queues["default"], RedisQueueBackend)


def test_no_settings_at_all_uses_local_redis(settings) -> None:
    del settings.REDISLOCK_LOCKS  # pytest-django sends no setting_changed for a deletion
    locks.reset()
    try:
        backend = locks["default"]  # built only: no command is sent to the machine's Redis
        assert backend.location == DEFAULT_LOCATION == "redis://127.0.0.1:6379/0"
        assert backend.key_prefix == "redislock"
        assert backend.options["DEFAULT_TTL"] == 30.0
    finally:
        locks.reset()


def test_override_settings_takes_effect_without_restart(redis_server: RedisProcess) -> None:
    before = locks["default"]
    other = {"default": {"LOCATION": redis_server.url.replace("/0", "/3"), "KEY_PREFIX": "o"}}
    with override_settings(REDISLOCK_LOCKS=other):
        inside = locks["default"]
        assert inside is not before
        assert inside.key_prefix == "o"
        assert inside.location.endswith("/3")
        assert inside.ping()
    assert locks["default"].key_prefix == "test"


def test_one_backend_per_alias_shared_by_threads() -> None:
    seen = []
    threads = [threading.Thread(target=lambda: seen.append(locks["default"])) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(5)
    assert len(seen) == 4
    assert all(backend is seen[0] for backend in seen)


def test_unknown_alias_names_the_setting_and_the_known_aliases() -> None:
    with pytest.raises(InvalidLockBackend, match=r"REDISLOCK_LOCKS has no alias 'nope'.*'default'"):
        locks["nope"]
    with pytest.raises(InvalidQueueBackend, match="REDISLOCK_QUEUES has no alias 'nope'"):
        queues["nope"]
    assert issubclass(InvalidLockBackend, ImproperlyConfigured)


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"BACKEND": "no.such.Backend"}, r"\['BACKEND'\] = 'no.such.Backend' cannot be imported"),
        ({"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}, "not a BaseLockBackend"),
        ({"OPTIONS": {"DEFAULT_TTL": 5, "TTL": 3}}, r"unknown OPTIONS key\(s\) 'TTL'; valid keys"),
        ({"OPTIONS": {"DEFAULT_TTL": 0}}, r"OPTIONS\['DEFAULT_TTL'\] must be > 0"),
        ({"OPTIONS": {"DEFAULT_TTL": "30"}}, "must be a number of seconds, not str"),
        ({"OPTIONS": {"DEFAULT_TIMEOUT": -1}}, r"OPTIONS\['DEFAULT_TIMEOUT'\] must be >= 0"),
        ({"OPTIONS": ["x"]}, "OPTIONS must be a dict"),
        ({"LOCATION": "http://x"}, "unsupported scheme"),
        ({"LOCATION": "redis://host:port/0"}, "bad port"),
        ({"LOCATION": 42}, "LOCATION must be a URL string"),
        ({"KEY_PREFIX": "a{b}"}, "KEY_PREFIX must be a non-empty string without braces"),
        ({"LOCATON": "redis://x"}, r"unknown key\(s\) 'LOCATON'"),
    ],
)
def test_bad_alias_settings_raise_a_clear_error(params, message) -> None:
    handler = LockHandler({"default": params})
    with pytest.raises(InvalidLockBackend, match=message) as info:
        handler["default"]
    assert "REDISLOCK_LOCKS" in str(info.value)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (["default"], "REDISLOCK_LOCKS must be a dict of aliases, got list"),
        ({"default": "redis://x"}, r"REDISLOCK_LOCKS\['default'\] must be a dict, got str"),
        ({"": {}}, "bad alias ''"),
    ],
)
def test_bad_setting_shape(value, message) -> None:
    with pytest.raises(InvalidLockBackend, match=message):
        LockHandler(value)["default"]


def test_refused_connection_says_what_to_set() -> None:
    backend = LockHandler({"default": {"LOCATION": "redis://127.0.0.1:1/0"}})["default"]
    with pytest.raises(ConnectionFailed) as info:
        backend.ping()
    text = str(info.value)
    assert "redis://127.0.0.1:1/0" in text
    assert "REDISLOCK_LOCKS['default']['LOCATION']" in text


def test_password_is_redacted_in_errors() -> None:
    backend = LockHandler({"default": {"LOCATION": "redis://:s3cret@127.0.0.1:1/0"}})["default"]
    with pytest.raises(ConnectionFailed) as info:
        backend.ping()
    assert "s3cret" not in str(info.value)


def test_reset_closes_and_rebuilds() -> None:
    handler = LockHandler({"default": {"LOCATION": "redis://127.0.0.1:1/0"}})
    first = handler["default"]
    handler.reset()
    assert handler["default"] is not first


def test_forked_child_gets_its_own_client(redis_server: RedisProcess) -> None:
    backend = locks["default"]
    assert isinstance(backend, RedisLockBackend)
    parent_client = backend.client
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: report whether it got a fresh client that works
        try:
            fresh = backend.client is not parent_client and backend.client.ping()
            os.write(write, b"1" if fresh else b"0")
        finally:
            os._exit(0)
    os.close(write)
    answer = os.read(read, 1)
    os.waitpid(pid, 0)
    assert answer == b"1"
    assert backend.client is parent_client
    assert parent_client.ping()


def test_a_queue_backend_builds_the_queue_class_the_queue_package_registered() -> None:
    from django_redislock.backends import redis
    from django_redislock.queue import Queue

    backend = RedisQueueBackend("registered", {})
    assert RedisQueueBackend.queue_class is Queue
    built = backend.queue("orders")
    assert type(built) is Queue
    assert backend.queue("orders") is built  # one object per name

    class Marked(Queue):
        pass

    try:
        redis.register_queue_class(Marked)
        assert type(backend.queue("other")) is Marked
        assert backend.queue("orders") is built  # already built: kept
    finally:
        redis.register_queue_class(Queue)


def test_without_a_registered_queue_class_queue_is_a_clear_error(monkeypatch) -> None:
    monkeypatch.setattr(RedisQueueBackend, "queue_class", None)
    with pytest.raises(RuntimeError, match="no queue class is registered"):
        RedisQueueBackend("unregistered", {}).queue("orders")


def test_a_process_that_imports_only_the_backend_module_can_build_queues() -> None:
    """Importing the backend imports the package, whose ``__init__`` registers the queue."""
    import subprocess
    import sys

    code = (
        "from django_redislock.backends.redis import RedisQueueBackend\n"
        "print(type(RedisQueueBackend('x', {}).queue('orders')).__name__)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout.strip() == "Queue"


def test_one_script_call_on_an_unreachable_queue_alias_says_what_to_set() -> None:
    import asyncio

    from django_redislock.queue.sending import run_call, run_call_async
    from django_redislock.queue.workers import registry_keys

    backend = RedisQueueBackend("gone", {"LOCATION": "redis://127.0.0.1:1/0"})
    call = ("workers_list", registry_keys(backend), [1])
    for send in (
        lambda: run_call(backend, call),
        lambda: asyncio.run(run_call_async(backend, call)),
    ):
        with pytest.raises(ConnectionFailed, match=r"REDISLOCK_QUEUES\['gone'\]\['LOCATION'\]"):
            send()
