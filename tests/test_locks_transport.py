"""The lock's direct EVALSHA path falls back to redis-py's own call when it must."""

from __future__ import annotations

from typing import Any

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from django_redislock import wire
from django_redislock.exceptions import ConnectionFailed

from .conftest import RedisTarget


def test_a_flushed_script_is_loaded_again(redis_target: RedisTarget) -> None:
    backend = redis_target.lock_backend()
    with backend.lock("flushed", ttl=5):
        pass
    redis_target.raw.script_flush()  # as after a restart: the server forgot every script
    with backend.lock("flushed", ttl=5) as lock:
        assert lock.fence > 0
    assert backend.held_lock_count() == 0


def test_a_failed_send_is_retried_under_the_client_policy(
    redis_target: RedisTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    if redis_target.kind != "single":
        pytest.skip("the direct path serves plain redis.Redis clients only")
    retry = Retry(NoBackoff(), 1)  # from_url clients retry 0 times unless told otherwise
    backend = redis_target.lock_backend(CLIENT_KWARGS={"retry": retry})
    client: Any = backend.client
    assert wire.direct_pool(client) is client.connection_pool
    lock = backend.lock("dropped", ttl=5)
    with lock:
        pass  # both scripts are loaded now
    lock.acquire()
    failures = [redis.ConnectionError("the link died mid-call")]
    real_read = redis.connection.Connection.read_response

    def read_once_broken(self: Any, *args: Any, **kwargs: Any) -> Any:
        if failures:
            raise failures.pop()
        return real_read(self, *args, **kwargs)

    sent: list[str] = []
    real_execute = client.execute_command

    def spy(*args: Any, **options: Any) -> Any:
        sent.append(str(args[0]))
        return real_execute(*args, **options)

    monkeypatch.setattr(redis.connection.Connection, "read_response", read_once_broken)
    monkeypatch.setattr(client, "execute_command", spy)
    lock.release()  # the direct send fails; it is sent again under the connection's policy
    assert sent == [] and not failures
    assert not lock.locked()


def test_without_retries_a_failed_send_raises_as_redis_py_would(
    redis_target: RedisTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    if redis_target.kind != "single":
        pytest.skip("the direct path serves plain redis.Redis clients only")
    backend = redis_target.lock_backend()
    lock = backend.lock("no-retry", ttl=5)
    with lock:
        pass
    lock.acquire()

    def broken(self: Any, *args: Any, **kwargs: Any) -> Any:
        raise redis.ConnectionError("the link died mid-call")

    monkeypatch.setattr(redis.connection.Connection, "read_response", broken)
    with pytest.raises(ConnectionFailed):
        lock.release()
    monkeypatch.undo()
    assert not lock.locked()  # the release ran; only its reply was lost (a retry would see 2)


def test_other_clients_use_execute_command(redis_target: RedisTarget) -> None:
    backend = redis_target.lock_backend()
    if redis_target.kind == "single":
        assert wire.direct_pool(backend.client) is not None
    else:
        assert wire.direct_pool(backend.client) is None
    pinned = redis.Redis(host="127.0.0.1", port=1)  # never connected: no I/O happens here
    pinned.connection = redis.Connection(host="127.0.0.1", port=1)  # as single_connection_client
    assert wire.direct_pool(pinned) is None
