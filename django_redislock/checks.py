"""System checks for ``REDISLOCK_LOCKS`` and ``REDISLOCK_QUEUES``. No network I/O.

=========================  ==========================================================
``redislock.E001``         the setting is not a dict of alias dicts
``redislock.E002``         ``BACKEND`` cannot be imported or is not a backend class
``redislock.E003``         unknown ``OPTIONS`` key
``redislock.E004``         bad ``OPTIONS`` value (non-positive TTL or timeout, wrong type)
``redislock.E005``         bad ``LOCATION``
``redislock.E006``         unknown key in an alias dict, or bad ``KEY_PREFIX``
``redislock.W001``         ``embedded://`` with ``DEBUG = False``
``redislock.W002``         a queue alias pickles payloads (``SERIALIZER``)
``redislock.W003``         a Redlock alias lists an even number of masters
=========================  ==========================================================
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error, Warning, register

from .backends.base import alias_key_errors
from .conf import DEFAULT_LOCATION, option_value_errors, unknown_option_errors
from .exceptions import ConfigurationError
from .handlers import BackendHandler, locks, queues, settings_errors

DOCS = "See the settings reference: docs/settings.md"


@register("redislock")
def check_settings(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """Check both settings; each message names the setting and alias."""
    return _check_handler(locks) + _check_handler(queues)


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
        messages.extend(_check_alias(handler, name, alias, params))
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
        messages.append(Error(f"{where}: {problem}", hint=DOCS, id="redislock.E006"))
    options = params.get("OPTIONS", {})
    if not isinstance(options, Mapping):
        return [
            *messages,
            Error(f"{where}: OPTIONS must be a dict", hint=DOCS, id="redislock.E004"),
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
        messages.append(Error(f"{where}: {problem}", hint=DOCS, id="redislock.E004"))
    location = params.get("LOCATION", DEFAULT_LOCATION)
    for problem in cls.location_errors(params):
        messages.append(
            Error(
                f"{where}: {problem}",
                hint="For example redis://127.0.0.1:6379/0.",
                id="redislock.E005",
            )
        )
    if _is_embedded(location) and not settings.DEBUG:
        messages.append(
            Warning(
                f"{where} uses {location!r}, a private development server, with DEBUG = False.",
                hint="embedded:// is for development, tests and the demo; point LOCATION at a "
                "managed Redis in production.",
                id="redislock.W001",
            )
        )
    if not messages:
        messages.extend(handler[alias].check())
    return messages


def _is_embedded(location: Any) -> bool:
    items = [location] if isinstance(location, str) else location
    return isinstance(items, (list, tuple)) and any(
        isinstance(item, str) and item.startswith("embedded://") for item in items
    )
