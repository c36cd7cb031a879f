"""System checks: the exact list of messages for each kind of bad setting."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest
from django.core import mail
from django.core.checks import Error, Warning
from django.test import override_settings

from django_redislock import checks as checks_module
from django_redislock.checks import check_settings, check_tasks
from django_redislock.handlers import locks, queues

DOCS = "https://github.com/django-redislock/django-redislock/blob/main/docs/settings.md"
COMMAND = "(or run: python -m django_redislock.docs settings)."
HINT = f"See {DOCS} {COMMAND}"
LOCK_HINT = f"See {DOCS}#lock-options {COMMAND}"
TASK_HINT = f"See {DOCS}#task-options {COMMAND}"
TASKS_BACKEND = "django_redislock.contrib.tasks.RedisTaskBackend"


def run(**settings) -> list:
    with override_settings(**settings):
        try:
            return check_settings() + (check_tasks() if "TASKS" in settings else [])
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
            hint=LOCK_HINT,
            id="redislock.E004",
        ),
        Error(
            "REDISLOCK_LOCKS['default']: OPTIONS['DEFAULT_TTL'] must be > 0 and <= 604800 "
            "seconds, got 0",
            hint=LOCK_HINT,
            id="redislock.E004",
        ),
        Error(
            "REDISLOCK_LOCKS['default']: OPTIONS['SOCKET_TIMEOUT'] must be > 0 and <= 604800 "
            "seconds, got 0",
            hint=LOCK_HINT,
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


def test_embedded_with_debug_off_warns(monkeypatch: pytest.MonkeyPatch) -> None:
    # Outside the test runner (which installs mail.outbox) and outside the temporary directory.
    monkeypatch.delattr(mail, "outbox", raising=False)
    aliases = {"default": {"LOCATION": "embedded:///srv/shop-redis"}}
    assert run(REDISLOCK_LOCKS=aliases, DEBUG=False) == [
        Warning(
            "REDISLOCK_LOCKS['default'] uses 'embedded:///srv/shop-redis', a private "
            "development server, with DEBUG = False.",
            hint="embedded:// is for development, tests and the demo; point LOCATION at a "
            "managed Redis in production. To keep it anyway, add 'redislock.W001' to "
            "SILENCED_SYSTEM_CHECKS.",
            id="redislock.W001",
        ),
    ]
    assert run(REDISLOCK_LOCKS=aliases, DEBUG=True) == []


def test_embedded_warning_is_silent_under_the_test_runner(tmp_path) -> None:
    # The test runner sets DEBUG = False; docs/embedded.md recommends embedded:// for tests.
    assert hasattr(mail, "outbox")
    aliases = {"default": {"LOCATION": "embedded:///srv/shop-redis"}}
    assert run(REDISLOCK_LOCKS=aliases, DEBUG=False) == []


def test_embedded_warning_is_silent_under_the_temporary_directory(
    monkeypatch: pytest.MonkeyPatch, tmp_path
) -> None:
    monkeypatch.delattr(mail, "outbox", raising=False)
    aliases = {"default": {"LOCATION": f"embedded://{tmp_path}/redis"}}
    assert run(REDISLOCK_LOCKS=aliases, DEBUG=False) == []


def test_embedded_path_too_long_for_a_socket() -> None:
    path = "/srv/" + "x" * 100
    assert run(REDISLOCK_QUEUES={"default": {"LOCATION": f"embedded://{path}"}}) == [
        Error(
            f"REDISLOCK_QUEUES['default']: embedded://{path} is too long for a Unix socket "
            f"('{path}/redis.sock' has 116 characters, at most 100).",
            hint="Choose a shorter LOCATION path, e.g. under the project directory.",
            id="redislock.E005",
        ),
    ]


def test_client_class_whose_package_is_missing() -> None:
    options = {"CLIENT_CLASS": "nosuchredis.FakeRedis"}
    assert run(REDISLOCK_LOCKS={"default": {"OPTIONS": options}}) == [
        Error(
            "REDISLOCK_LOCKS['default']: OPTIONS['CLIENT_CLASS'] = 'nosuchredis.FakeRedis' "
            "cannot be imported: No module named 'nosuchredis'",
            hint="Install the package that provides it, or fix the path.",
            id="redislock.E007",
        ),
    ]
    assert (
        run(REDISLOCK_LOCKS={"default": {"OPTIONS": {"CLIENT_CLASS": "fakeredis.FakeRedis"}}}) == []
    )


@pytest.mark.parametrize(
    "backend", [TASKS_BACKEND, "django_redislock.contrib.tasks.backend.RedisTaskBackend"]
)
def test_typoed_task_option(backend: str) -> None:
    tasks = {"default": {"BACKEND": backend, "OPTIONS": {"USIN": "default", "LEASE": 0}}}
    assert run(TASKS=tasks) == [
        Error(
            "TASKS['default']: unknown OPTIONS key(s) 'USIN'; valid keys are LEASE, "
            "MAX_ATTEMPTS, RESULT_TTL, USING",
            hint=TASK_HINT,
            id="redislock.E008",
        ),
        Error(
            "TASKS['default']: OPTIONS['LEASE'] must be > 0 and <= 604800 seconds, got 0",
            hint=TASK_HINT,
            id="redislock.E008",
        ),
    ]


def test_task_option_using_names_no_queue_alias() -> None:
    tasks = {"default": {"BACKEND": TASKS_BACKEND, "OPTIONS": {"USING": "jobs"}}}
    queues_setting = {"default": {"LOCATION": "redis://127.0.0.1:1/0"}}
    assert run(TASKS=tasks, REDISLOCK_QUEUES=queues_setting) == [
        Error(
            "TASKS['default']: OPTIONS['USING'] = 'jobs' names no REDISLOCK_QUEUES alias "
            "(defined aliases: 'default').",
            hint="Add 'jobs' to REDISLOCK_QUEUES or name one of its aliases.",
            id="redislock.E009",
        ),
    ]
    queues_setting["jobs"] = queues_setting["default"]
    assert run(TASKS=tasks, REDISLOCK_QUEUES=queues_setting) == []


def test_tasks_backend_without_the_framework(monkeypatch: pytest.MonkeyPatch) -> None:
    # As on Django 4.2/5.x without the backport: neither module can be found.
    find_spec = importlib.util.find_spec

    def missing(name: str, *args):
        return None if name in ("django.tasks", "django_tasks") else find_spec(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", missing)
    tasks = {"default": {"BACKEND": TASKS_BACKEND}}
    assert run(TASKS=tasks) == [
        Error(
            f"TASKS['default'] uses {TASKS_BACKEND}, but Django's tasks framework is not "
            "installed.",
            hint="Django 6.0+ ships it as django.tasks; on Django 4.2/5.x install the "
            "backport: pip install 'django-redislock[tasks]'.",
            id="redislock.E010",
        ),
    ]


def test_a_crashing_backend_check_becomes_a_message(monkeypatch: pytest.MonkeyPatch) -> None:
    from django_redislock.backends.redis import RedisLockBackend

    def broken(self, **kwargs):
        raise KeyError("boom")

    monkeypatch.setattr(RedisLockBackend, "check", broken)
    aliases = {"default": {"LOCATION": "redis://127.0.0.1:1/0"}}
    assert run(REDISLOCK_LOCKS=aliases) == [
        Error(
            "REDISLOCK_LOCKS['default'] could not be checked: KeyError: 'boom'",
            hint="Fix the setting this names; if it looks right, report the exception.",
            id="redislock.E011",
        ),
    ]


def test_manage_py_check_reports_a_typoed_task_option_without_a_traceback() -> None:
    from django.core.management import call_command
    from django.core.management.base import SystemCheckError

    tasks = {"default": {"BACKEND": TASKS_BACKEND, "OPTIONS": {"USIN": "default"}}}
    with (
        override_settings(TASKS=tasks),
        pytest.raises(SystemCheckError, match=r"redislock\.E008"),
    ):
        call_command("check")


def test_every_reported_id_is_documented() -> None:
    from django_redislock.check_ids import CHECKS

    # every module that can report a check, wherever it lives (the table and the page that
    # prints it are left out, so an id only they name is not counted as reported)
    package = Path(checks_module.__file__).parent
    listed = {package / "check_ids.py", package / "docs.py"}
    source = "".join(p.read_text() for p in sorted(package.rglob("*.py")) if p not in listed)
    assert sorted(set(re.findall(r'"(redislock\.[EW]\d{3})"', source))) == sorted(CHECKS)


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


def _resend_messages(options: dict) -> list:
    aliases = {"default": {"LOCATION": "redis://127.0.0.1:1/0", "OPTIONS": options}}
    with override_settings(REDISLOCK_LOCKS=aliases):
        try:
            return checks_module.check_resend_window()
        finally:
            locks.reset()


def test_the_default_resend_window_fits_the_request_memory() -> None:
    # redis-py's default retry (10 retries) with the default 5 s SOCKET_TIMEOUT: about 95 s.
    assert _resend_messages({}) == []


def test_a_resend_window_past_the_request_memory_is_an_error() -> None:
    from redis.backoff import ConstantBackoff
    from redis.retry import Retry

    [message] = _resend_messages({"SOCKET_TIMEOUT": 12.0})
    assert message.id == "redislock.E012" and "REDISLOCK_LOCKS['default']" in message.msg
    assert "10 retries" in message.msg and "SOCKET_TIMEOUT" in message.hint
    retry = Retry(ConstantBackoff(0.5), 3)
    assert _resend_messages({"SOCKET_TIMEOUT": 12.0, "CLIENT_KWARGS": {"retry": retry}}) == []
    endless = Retry(ConstantBackoff(0.5), -1)
    assert [m.id for m in _resend_messages({"CLIENT_KWARGS": {"retry": endless}})] == [
        "redislock.E012"
    ]
