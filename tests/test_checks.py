"""System checks: the exact list of messages for each kind of bad setting."""

from __future__ import annotations

import pytest
from django.core.checks import Error, Warning
from django.test import override_settings

from django_redislock.checks import check_settings
from django_redislock.handlers import locks, queues

HINT = "See the settings reference: docs/settings.md"


def run(**settings) -> list:
    with override_settings(**settings):
        try:
            return check_settings()
        finally:
            locks.reset()
            queues.reset()


def test_valid_settings_pass() -> None:
    aliases = {"default": {"LOCATION": "redis://127.0.0.1:1/0", "OPTIONS": {"DEFAULT_TTL": 5}}}
    assert run(REDISLOCK_LOCKS=aliases, REDISLOCK_QUEUES={}) == []


def test_setting_shape() -> None:
    assert run(REDISLOCK_LOCKS=["default"]) == [
        Error(
            "REDISLOCK_LOCKS must be a dict of aliases, got list",
            hint="REDISLOCK_LOCKS = {'default': {'LOCATION': ...}}",
            id="redislock.E001",
        ),
    ]


def test_unknown_backend() -> None:
    assert run(REDISLOCK_QUEUES={"jobs": {"BACKEND": "myapp.Nope"}}) == [
        Error(
            "REDISLOCK_QUEUES['jobs']['BACKEND'] = 'myapp.Nope' cannot be imported: "
            "No module named 'myapp'",
            hint="Use a dotted path to a backend class, e.g. "
            "'django_redislock.backends.redis.RedisQueueBackend'.",
            id="redislock.E002",
        ),
    ]


def test_unknown_option_names_alias_and_valid_keys() -> None:
    messages = run(REDISLOCK_LOCKS={"default": {"OPTIONS": {"DEFAULT_TTL": 1, "TIMEOUT": 2}}})
    assert len(messages) == 1
    assert messages[0].id == "redislock.E003"
    assert messages[0].msg.startswith(
        "REDISLOCK_LOCKS['default']: unknown OPTIONS key(s) 'TIMEOUT'; valid keys are "
        "CLIENT_CLASS, CLIENT_KWARGS, CLUSTER, DEFAULT_TIMEOUT, DEFAULT_TTL,"
    )
    assert messages[0].hint == "Remove the key or fix its spelling."


def test_non_positive_ttl_and_timeouts() -> None:
    options = {"DEFAULT_TTL": 0, "DEFAULT_TIMEOUT": -1, "SOCKET_TIMEOUT": 0}
    assert run(REDISLOCK_LOCKS={"default": {"OPTIONS": options}}) == [
        Error(
            "REDISLOCK_LOCKS['default']: OPTIONS['DEFAULT_TIMEOUT'] must be >= 0 and <= 604800 "
            "seconds, got -1",
            hint=HINT,
            id="redislock.E004",
        ),
        Error(
            "REDISLOCK_LOCKS['default']: OPTIONS['DEFAULT_TTL'] must be > 0 and <= 604800 "
            "seconds, got 0",
            hint=HINT,
            id="redislock.E004",
        ),
        Error(
            "REDISLOCK_LOCKS['default']: OPTIONS['SOCKET_TIMEOUT'] must be > 0 and <= 604800 "
            "seconds, got 0",
            hint=HINT,
            id="redislock.E004",
        ),
    ]


def test_bad_location() -> None:
    assert run(REDISLOCK_LOCKS={"default": {"LOCATION": "localhost:6379"}}) == [
        Error(
            "REDISLOCK_LOCKS['default']: LOCATION 'localhost:6379' has an unsupported scheme; "
            "use one of redis://, rediss://, unix://, cache://, embedded://",
            hint="For example redis://127.0.0.1:6379/0.",
            id="redislock.E005",
        ),
    ]


def test_bad_alias_keys_and_prefix() -> None:
    assert run(REDISLOCK_LOCKS={"default": {"PREFIX": "x", "KEY_PREFIX": ""}}) == [
        Error(
            "REDISLOCK_LOCKS['default']: unknown key(s) 'PREFIX'; valid keys are BACKEND, "
            "LOCATION, KEY_PREFIX, OPTIONS",
            hint=HINT,
            id="redislock.E006",
        ),
        Error(
            "REDISLOCK_LOCKS['default']: KEY_PREFIX must be a non-empty string without "
            "braces, got ''",
            hint=HINT,
            id="redislock.E006",
        ),
    ]


def test_embedded_with_debug_off_warns() -> None:
    aliases = {"default": {"LOCATION": "embedded:///tmp/shop-redis"}}
    assert run(REDISLOCK_LOCKS=aliases, DEBUG=False) == [
        Warning(
            "REDISLOCK_LOCKS['default'] uses 'embedded:///tmp/shop-redis', a private "
            "development server, with DEBUG = False.",
            hint="embedded:// is for development, tests and the demo; point LOCATION at a "
            "managed Redis in production.",
            id="redislock.W001",
        ),
    ]
    assert run(REDISLOCK_LOCKS=aliases, DEBUG=True) == []


def test_checks_do_no_network_io() -> None:
    # Port 1 refuses connections: a check that connected would raise or report it.
    aliases = {"default": {"LOCATION": "redis://127.0.0.1:1/0"}}
    assert run(REDISLOCK_LOCKS=aliases, REDISLOCK_QUEUES=aliases) == []


def test_manage_py_check_reports_our_ids() -> None:
    from django.core.management import call_command
    from django.core.management.base import SystemCheckError

    with (
        override_settings(REDISLOCK_LOCKS={"default": {"OPTIONS": {"DEFAULT_TTL": -5}}}),
        pytest.raises(SystemCheckError, match=r"redislock\.E004"),
    ):
        call_command("check")
    locks.reset()
