"""The ``locks`` and ``queues`` handlers, in the style of Django's ``caches``.

``locks["default"]`` returns the lock backend of the ``default`` alias of
``REDISLOCK_LOCKS``; ``queues["default"]`` the queue backend of
``REDISLOCK_QUEUES``. Settings are read on first use and forgotten by the
``setting_changed`` receiver in :mod:`django_redislock.signals`.

Unlike Django's cache handler, a backend is shared by every thread of the
process: a lock backend owns the process's renewal scheduler and connection
pool, and one per thread would multiply both.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from typing import Any, Generic, TypeVar

from django.conf import settings as django_settings
from django.core.signals import setting_changed
from django.dispatch import receiver
from django.utils.module_loading import import_string

from .backends.base import BaseBackend, BaseLockBackend, BaseQueueBackend
from .conf import (
    DEFAULT_ALIAS,
    DEFAULT_LOCK_BACKEND,
    DEFAULT_QUEUE_BACKEND,
    LOCKS_SETTING,
    QUEUES_SETTING,
)
from .exceptions import ConfigurationError, InvalidLockBackend, InvalidQueueBackend

B = TypeVar("B", bound=BaseBackend)


def settings_errors(value: Any, setting: str) -> list[str]:
    """Return the shape problems of a ``REDISLOCK_*`` setting value."""
    if not isinstance(value, Mapping):
        return [f"{setting} must be a dict of aliases, got {type(value).__name__}"]
    errors = []
    for alias, params in value.items():
        if not isinstance(alias, str) or not alias:
            errors.append(f"{setting} has a bad alias {alias!r}; aliases are non-empty strings")
        elif not isinstance(params, Mapping):
            errors.append(f"{setting}[{alias!r}] must be a dict, got {type(params).__name__}")
    return errors


class BackendHandler(Generic[B]):
    """Maps aliases of one setting to backend instances, built lazily once per process."""

    settings_name: str
    default_backend: str
    exception_class: type[ConfigurationError]
    base_class: type[BaseBackend]

    def __init__(self, settings: Mapping[str, Any] | None = None) -> None:
        self._explicit = settings
        self._settings: Mapping[str, Any] | None = None
        self._backends: dict[str, B] = {}
        self._lock = threading.RLock()

    @property
    def settings(self) -> Mapping[str, Any]:
        """The setting's aliases, read on first use (``{"default": {}}`` when unset)."""
        if self._settings is None:
            value = self._explicit
            if value is None:
                value = getattr(django_settings, self.settings_name, None) or {DEFAULT_ALIAS: {}}
            errors = settings_errors(value, self.settings_name)
            if errors:
                raise self.exception_class(errors[0])
            self._settings = value
        return self._settings

    def __getitem__(self, alias: str) -> B:
        backend = self._backends.get(alias)
        if backend is None:
            with self._lock:
                backend = self._backends.get(alias)
                if backend is None:
                    backend = self._backends[alias] = self.create_backend(alias)
        return backend

    def __iter__(self) -> Iterator[str]:
        return iter(self.settings)

    def __contains__(self, alias: object) -> bool:
        return alias in self.settings

    def backend_class(self, alias: str) -> type[B]:
        """Import the ``BACKEND`` class of ``alias`` (no connection is made)."""
        if not isinstance(alias, str) or alias not in self.settings:
            raise self.exception_class(
                f"{self.settings_name} has no alias {alias!r}; "
                f"defined aliases: {', '.join(map(repr, self.settings)) or 'none'}"
            )
        path = self.settings[alias].get("BACKEND", self.default_backend)
        try:
            cls = import_string(path)
        except ImportError as exc:
            raise self.exception_class(
                f"{self.settings_name}[{alias!r}]['BACKEND'] = {path!r} cannot be imported: {exc}"
            ) from exc
        if not (isinstance(cls, type) and issubclass(cls, self.base_class)):
            raise self.exception_class(
                f"{self.settings_name}[{alias!r}]['BACKEND'] = {path!r} is not a "
                f"{self.base_class.__name__} subclass"
            )
        return cls  # type: ignore[return-value]

    def create_backend(self, alias: str) -> B:
        """Build the backend of ``alias``; configuration errors name the setting."""
        cls = self.backend_class(alias)
        try:
            return cls(alias, self.settings[alias])
        except ConfigurationError as exc:
            if isinstance(exc, self.exception_class):
                raise
            raise self.exception_class(str(exc)) from exc

    def all(self, initialized_only: bool = False) -> list[B]:
        """Return the backend of every alias (only the built ones with ``initialized_only``)."""
        if initialized_only:
            return list(self._backends.values())
        return [self[alias] for alias in self]

    def reset(self) -> None:
        """Close and forget every backend and the settings (after a settings change)."""
        with self._lock:
            for backend in self._backends.values():
                backend.close()
            self._backends = {}
            self._settings = None


class LockHandler(BackendHandler[BaseLockBackend]):
    """``locks[alias]``: the lock backends of ``REDISLOCK_LOCKS``."""

    settings_name = LOCKS_SETTING
    default_backend = DEFAULT_LOCK_BACKEND
    exception_class = InvalidLockBackend
    base_class = BaseLockBackend


class QueueHandler(BackendHandler[BaseQueueBackend]):
    """``queues[alias]``: the queue backends of ``REDISLOCK_QUEUES``."""

    settings_name = QUEUES_SETTING
    default_backend = DEFAULT_QUEUE_BACKEND
    exception_class = InvalidQueueBackend
    base_class = BaseQueueBackend


locks: LockHandler = LockHandler()
queues: QueueHandler = QueueHandler()


@receiver(setting_changed)
def reset_handlers(*, setting: str, **kwargs: Any) -> None:
    """Forget backends built from a setting that changed (makes ``override_settings`` work).

    Connected here, next to the handlers, so it exists whenever they do.
    """
    if setting == LOCKS_SETTING:
        locks.reset()
    elif setting == QUEUES_SETTING:
        queues.reset()
