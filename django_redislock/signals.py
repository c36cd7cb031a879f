"""Signals sent by this app (the settings receiver lives with the handlers it resets).

Lock signals carry ``alias`` and ``name``; task signals carry ``queue`` and ``task``.
"""

from __future__ import annotations

from django.dispatch import Signal

# The lock signals are sent on every acquire and release: ``use_caching`` makes a send
# with no receiver return at once and spares one with receivers a scan of all receivers.

#: A lock was granted: ``alias``, ``name``, ``fence``, ``waited`` (seconds spent in acquire),
#: ``kind`` (``mutex``, ``reentrant``, ``read``, ``write``, ``semaphore``, ``fair``).
lock_acquired = Signal(use_caching=True)
#: An acquire returned without a grant: ``alias``, ``name``, ``kind``, ``blocking`` (False: a
#: try that did not wait found it taken; True: the wait ran out).
lock_not_acquired = Signal(use_caching=True)
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
