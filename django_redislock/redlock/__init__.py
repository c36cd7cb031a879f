"""Redlock: a mutex held on a quorum of independent Redis masters.

The backend is :class:`django_redislock.backends.redlock.RedlockBackend`; this
package holds its parts: the masters (:mod:`.masters`), the calls of one lock on
every master and their quorum counts (:mod:`.quorum`), the lock with its waiting
and cancellation handling (:mod:`.lock`) and the merged admin listing (:mod:`.listing`).
"""

from __future__ import annotations

from .lock import RedlockLock
from .masters import Master

__all__ = ["Master", "RedlockLock"]
