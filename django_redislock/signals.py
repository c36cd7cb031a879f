"""Signals sent by this app, and the receiver that resets the handlers on settings changes.

Lock signals carry ``alias`` and ``name``; task signals carry ``queue`` and ``task``.
"""

from __future__ import annotations

from typing import Any

from django.core.signals import setting_changed
from django.dispatch import Signal, receiver

from .conf import LOCKS_SETTING, QUEUES_SETTING

# The lock signals are sent on every acquire and release: ``use_caching`` makes a send
# with no receiver return at once and spares one with receivers a scan of all receivers.

#: A lock was granted: ``alias``, ``name``, ``fence``, ``waited`` (seconds spent in acquire).
lock_acquired = Signal(use_caching=True)
#: A lock was released by its holder: ``alias``, ``name``.
lock_released = Signal(use_caching=True)
#: A hold ended without a release (expired, stolen, force-released): ``alias``, ``name``.
lock_lost = Signal(use_caching=True)

# The task signals are sent for every task a worker runs, and the workers registry
# listens to them in every worker: cached too.

#: A worker started a task: ``queue``, ``task``.
task_started = Signal(use_caching=True)
#: A task returned: ``queue``, ``task``, ``result``.
task_succeeded = Signal(use_caching=True)
#: A task raised and will be retried: ``queue``, ``task``, ``error``.
task_failed = Signal(use_caching=True)
#: A task used up its attempts and went to the dead-letter set: ``queue``, ``task``, ``error``.
task_dead = Signal(use_caching=True)


@receiver(setting_changed)
def reset_handlers(*, setting: str, **kwargs: Any) -> None:
    """Forget backends built from a setting that changed (makes ``override_settings`` work)."""
    from .handlers import locks, queues

    if setting == LOCKS_SETTING:
        locks.reset()
    elif setting == QUEUES_SETTING:
        queues.reset()
