"""System checks for ``REDISLOCK_LOCKS``, ``REDISLOCK_QUEUES`` and ``TASKS``. No network I/O.

Everything that can be known before the first call is reported here, with an id and a hint,
instead of failing at run time. A check that cannot run (an unexpected exception from a
backend's own ``check()``) is reported as ``redislock.E011`` instead of crashing
``manage.py check``. :data:`django_redislock.check_ids.CHECKS` lists every id; the settings
reference is generated from it.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import tempfile
from collections.abc import Callable, Mapping
from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error, Warning, register
from django.utils.module_loading import import_string

from .backends.base import alias_key_errors
from .backends.eviction import eviction_policies
from .conf import (
    DEFAULT_ALIAS,
    DEFAULT_LOCATION,
    QUEUES_SETTING,
    TASK_OPTIONS,
    option_errors,
    option_value_errors,
    unknown_option_errors,
)
from .docs import settings_hint
from .embedded import MAX_SOCKET_PATH, socket_path
from .exceptions import ConfigurationError
from .handlers import BackendHandler, locks, queues, settings_errors
from .locking.resend import REQUEST_MEMORY_SECONDS, resend_window

TASK_BACKEND = "django_redislock.contrib.tasks.RedisTaskBackend"
#: The dotted paths that name this app's tasks backend.
TASK_BACKEND_PATHS = {TASK_BACKEND, "django_redislock.contrib.tasks.backend.RedisTaskBackend"}


@register("redislock")
def check_settings(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """Check both settings; each message names the setting and alias."""
    return _check_handler(locks) + _check_handler(queues)


@register("redislock")
def check_tasks(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """Check the ``TASKS`` aliases that use this app's backend (options, queue alias, framework)."""
    value = getattr(settings, "TASKS", None)
    if not isinstance(value, Mapping):
        return []
    messages: list[CheckMessage] = []
    for alias, params in value.items():
        if isinstance(params, Mapping) and params.get("BACKEND") in TASK_BACKEND_PATHS:
            messages.extend(_guarded(f"TASKS[{alias!r}]", _check_task_alias, alias, params))
    return messages


def _each_lock_alias(check: Callable[[str, str], list[CheckMessage]]) -> list[CheckMessage]:
    """Run ``check(where, alias)`` on every lock alias of valid settings (each one guarded)."""
    value = getattr(settings, locks.settings_name, None)
    if value is None or settings_errors(value, locks.settings_name):
        return []
    messages: list[CheckMessage] = []
    for alias in value:
        where = f"{locks.settings_name}[{alias!r}]"
        messages.extend(_guarded(where, check, where, alias))
    return messages


@register("redislock")
def check_resend_window(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """E012: a lock alias whose client may resend a request after the memory forgot it."""
    return _each_lock_alias(_check_resend_window)


def _check_resend_window(where: str, alias: str) -> list[CheckMessage]:
    try:
        options = getattr(locks[alias], "options", None)
    except ConfigurationError:
        return []  # reported by check_settings
    if not isinstance(options, Mapping) or "SOCKET_TIMEOUT" not in options:
        return []
    window, retries = resend_window(options)
    if window <= REQUEST_MEMORY_SECONDS:
        return []
    return [
        Error(
            f"{where}: the client may resend a lock request up to {window:g} s after it first "
            f"sent it ({retries} retries of SOCKET_TIMEOUT {options['SOCKET_TIMEOUT']:g} s), "
            f"but a bucket remembers applied requests for {REQUEST_MEMORY_SECONDS:g} s: a "
            "later resend would be applied twice.",
            hint="Lower OPTIONS['SOCKET_TIMEOUT'] or the retries of OPTIONS['CLIENT_KWARGS']"
            "['retry'] (see docs/locks.md, 'When calls fail').",
            id="redislock.E012",
        )
    ]


@register("redislock", deploy=True)
def check_eviction(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """E013/W005 at ``check --deploy``: a lock server that may evict keys (the one check
    that talks to Redis, hence deploy-only; see backends/eviction.py)."""
    return _each_lock_alias(_check_eviction)


def _check_eviction(where: str, alias: str) -> list[CheckMessage]:
    try:
        backend = locks[alias]
    except ConfigurationError:
        return []  # reported by check_settings
    options = getattr(backend, "options", {})
    if not options.get("EVICTION_CHECK", False):
        return []
    location = backend.location
    servers = list(location) if getattr(backend, "masters", None) else [location]
    messages: list[CheckMessage] = []
    for server, policy, reason in eviction_policies(servers, options):
        if policy is None:
            messages.append(
                Warning(
                    f"{where}: could not read maxmemory-policy of {server} ({reason}).",
                    hint="Make sure it is 'noeviction' (docs/scale.md); set OPTIONS"
                    "['EVICTION_CHECK'] = False to skip this check where CONFIG is refused.",
                    id="redislock.W005",
                )
            )
        elif policy != "noeviction":
            messages.append(
                Error(
                    f"{where}: {server} has maxmemory-policy {policy!r}: under memory pressure "
                    "it may evict a held lock (another process then acquires it) or the fence "
                    "counter (fences start again at 1).",
                    hint="Run locks on a server with maxmemory-policy noeviction, e.g. one of "
                    "their own, not the cache's (docs/scale.md).",
                    id="redislock.E013",
                )
            )
    return messages


@register("redislock")
def check_metrics(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """Warn when the metrics URLs are mounted without ``prometheus_client`` (W004)."""
    from .metrics.checks import check_prometheus

    return check_prometheus()


def _guarded(
    where: str, check: Callable[..., list[CheckMessage]], *args: Any
) -> list[CheckMessage]:
    """Run one check; an unexpected exception becomes a message instead of a traceback."""
    try:
        return check(*args)
    except Exception as exc:
        return [
            Error(
                f"{where} could not be checked: {type(exc).__name__}: {exc}",
                hint="Fix the setting this names; if it looks right, report the exception.",
                id="redislock.E011",
            )
        ]


def _check_handler(handler: BackendHandler[Any]) -> list[CheckMessage]:
    name = handler.settings_name
    value = getattr(settings, name, None)
    if value is None:
        return []
    shape = settings_errors(value, name)
    if shape:
        return [
            Error(
                shape[0], hint=f"{name} = {{'default': {{'LOCATION': ...}}}}", id="redislock.E001"
            )
        ]
    messages: list[CheckMessage] = []
    for alias, params in value.items():
        messages.extend(_guarded(f"{name}[{alias!r}]", _check_alias, handler, name, alias, params))
    return messages


def _check_alias(
    handler: BackendHandler[Any], name: str, alias: str, params: Mapping[str, Any]
) -> list[CheckMessage]:
    where = f"{name}[{alias!r}]"
    try:
        cls = handler.backend_class(alias)
    except ConfigurationError as exc:
        return [
            Error(
                str(exc),
                hint=f"Use a dotted path to a backend class, e.g. {handler.default_backend!r}.",
                id="redislock.E002",
            )
        ]
    messages: list[CheckMessage] = []
    for problem in alias_key_errors(params):
        messages.append(Error(f"{where}: {problem}", hint=settings_hint(""), id="redislock.E006"))
    options = params.get("OPTIONS", {})
    section = "lock-options" if handler is locks else "queue-options"
    if not isinstance(options, Mapping):
        return [
            *messages,
            Error(
                f"{where}: OPTIONS must be a dict", hint=settings_hint(section), id="redislock.E004"
            ),
        ]
    for problem in unknown_option_errors(options, cls.option_schema):
        messages.append(
            Error(
                f"{where}: {problem}",
                hint="Remove the key or fix its spelling.",
                id="redislock.E003",
            )
        )
    for problem in option_value_errors(options, cls.option_schema):
        messages.append(
            Error(f"{where}: {problem}", hint=settings_hint(section), id="redislock.E004")
        )
    messages += _client_class_errors(where, options)
    location = params.get("LOCATION", DEFAULT_LOCATION)
    for problem in cls.location_errors(params):
        messages.append(
            Error(
                f"{where}: {problem}",
                hint="For example redis://127.0.0.1:6379/0.",
                id="redislock.E005",
            )
        )
    messages += _embedded_messages(where, location)
    if not any(message.is_serious() for message in messages):
        messages.extend(handler[alias].check())
    return messages


def _client_class_errors(where: str, options: Mapping[str, Any]) -> list[CheckMessage]:
    """E007: a ``CLIENT_CLASS`` path whose module cannot be imported."""
    path = options.get("CLIENT_CLASS")
    if not isinstance(path, str) or "." not in path:
        return []
    try:
        import_string(path)
    except ImportError as exc:
        package = path.split(".")[0]
        extra = " (pip install 'django-redislock[fakeredis]')" if package == "fakeredis" else ""
        return [
            Error(
                f"{where}: OPTIONS['CLIENT_CLASS'] = {path!r} cannot be imported: {exc}",
                hint=f"Install the package that provides it{extra}, or fix the path.",
                id="redislock.E007",
            )
        ]
    return []


def _embedded_paths(location: Any) -> list[str]:
    items = [location] if isinstance(location, str) else location
    if not isinstance(items, (list, tuple)):
        return []
    return [
        os.path.abspath(item[len("embedded://") :])
        for item in items
        if isinstance(item, str) and item.startswith("embedded://")
    ]


def _embedded_messages(where: str, location: Any) -> list[CheckMessage]:
    """E005 for a socket path that cannot fit; W001 for ``embedded://`` with DEBUG off."""
    messages: list[CheckMessage] = []
    for path in _embedded_paths(location):
        sock = socket_path(path)
        if len(sock) > MAX_SOCKET_PATH:
            messages.append(
                Error(
                    f"{where}: embedded://{path} is too long for a Unix socket "
                    f"({sock!r} has {len(sock)} characters, at most {MAX_SOCKET_PATH}).",
                    hint="Choose a shorter LOCATION path, e.g. under the project directory.",
                    id="redislock.E005",
                )
            )
        elif not settings.DEBUG and not _testing() and not _is_temporary(path):
            messages.append(
                Warning(
                    f"{where} uses {location!r}, a private development server, with DEBUG = False.",
                    hint="embedded:// is for development, tests and the demo; point LOCATION at "
                    "a managed Redis in production. To keep it anyway, add 'redislock.W001' to "
                    "SILENCED_SYSTEM_CHECKS.",
                    id="redislock.W001",
                )
            )
    return messages


def _testing() -> bool:
    """True under Django's test runner (or pytest-django): it installs ``mail.outbox``.

    Read from ``sys.modules``: the test runner has imported ``django.core.mail`` by then, and
    importing it here would load the email package into every process that runs checks.
    """
    mail = sys.modules.get("django.core.mail")
    return mail is not None and hasattr(mail, "outbox")


def _is_temporary(path: str) -> bool:
    """True for a path under the temporary directory (a test's own server)."""
    temp = os.path.realpath(tempfile.gettempdir())
    return os.path.realpath(path).startswith(temp + os.sep)


def _check_task_alias(alias: str, params: Mapping[str, Any]) -> list[CheckMessage]:
    where = f"TASKS[{alias!r}]"
    if not _tasks_framework_installed():
        return [
            Error(
                f"{where} uses {TASK_BACKEND}, but Django's tasks framework is not installed.",
                hint="Django 6.0+ ships it as django.tasks; on Django 4.2/5.x install the "
                "backport: pip install 'django-redislock[tasks]'.",
                id="redislock.E010",
            )
        ]
    options = params.get("OPTIONS", {})
    messages: list[CheckMessage] = [
        Error(f"{where}: {problem}", hint=settings_hint("task-options"), id="redislock.E008")
        for problem in option_errors(options, TASK_OPTIONS)
    ]
    using = options.get("USING", DEFAULT_ALIAS) if isinstance(options, Mapping) else None
    try:
        aliases = queues.settings
    except ConfigurationError:  # a bad REDISLOCK_QUEUES is reported as E001
        return messages
    if isinstance(using, str) and using and using not in aliases:
        defined = ", ".join(map(repr, aliases)) or "none"
        messages.append(
            Error(
                f"{where}: OPTIONS['USING'] = {using!r} names no {QUEUES_SETTING} alias "
                f"(defined aliases: {defined}).",
                hint=f"Add {using!r} to {QUEUES_SETTING} or name one of its aliases.",
                id="redislock.E009",
            )
        )
    return messages


def _tasks_framework_installed() -> bool:
    for name in ("django.tasks", "django_tasks"):
        try:
            if importlib.util.find_spec(name) is not None:
                return True
        except ImportError:
            continue
    return False
