"""The deploy check of a lock server's maxmemory-policy (redislock.E013, W005), on real servers.

An evicting policy lets Redis drop a held lock's key (a second process then acquires it) or
the fence counter; only ``noeviction`` keeps exclusion (issue 23, docs/scale.md).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.test import override_settings

from django_redislock.checks import check_eviction
from django_redislock.handlers import locks

from .servers import RedisProcess


@pytest.fixture(scope="module")
def evicting(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisProcess]:
    server = RedisProcess(
        tmp_path_factory.mktemp("redis-lru"), extra=["--maxmemory-policy", "allkeys-lru"]
    ).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def no_config(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisProcess]:
    server = RedisProcess(
        tmp_path_factory.mktemp("redis-noconfig"), extra=["--rename-command", "CONFIG", ""]
    ).start()
    yield server
    server.stop()


def _messages(location: object, **options: object) -> list:
    aliases = {"default": {"LOCATION": location, "OPTIONS": options}}
    with override_settings(REDISLOCK_LOCKS=aliases):
        try:
            return check_eviction()
        finally:
            locks.reset()


def test_an_evicting_lock_server_is_an_error(evicting: RedisProcess) -> None:
    [message] = _messages(evicting.url)
    assert message.id == "redislock.E013"
    assert "REDISLOCK_LOCKS['default']" in message.msg and str(evicting.port) in message.msg
    assert "allkeys-lru" in message.msg and "noeviction" in message.hint


def test_a_noeviction_lock_server_passes(redis_server: RedisProcess) -> None:
    assert _messages(redis_server.url) == []


def test_each_redlock_master_is_checked(evicting: RedisProcess, redis_server: RedisProcess) -> None:
    aliases = {
        "default": {
            "BACKEND": "django_redislock.backends.redlock.RedlockBackend",
            "LOCATION": [redis_server.url, evicting.url, redis_server.url[:-1] + "1"],
        }
    }
    with override_settings(REDISLOCK_LOCKS=aliases):
        try:
            messages = check_eviction()
        finally:
            locks.reset()
    assert [m.id for m in messages] == ["redislock.E013"]
    assert str(evicting.port) in messages[0].msg


def test_a_refused_config_get_is_a_warning_and_can_be_skipped(no_config: RedisProcess) -> None:
    [message] = _messages(no_config.url)
    assert message.id == "redislock.W005" and "could not read" in message.msg
    assert "EVICTION_CHECK" in message.hint
    assert _messages(no_config.url, EVICTION_CHECK=False) == []


def test_only_check_deploy_reads_the_policy(evicting: RedisProcess, tmp_path: Path) -> None:
    aliases = {"default": {"LOCATION": evicting.url}}
    with override_settings(REDISLOCK_LOCKS=aliases):
        try:
            call_command("check")  # plain check: no network I/O, nothing reported
            with pytest.raises(SystemCheckError, match=r"redislock\.E013"):
                call_command("check", deploy=True)
        finally:
            locks.reset()
