"""Redlock: a mutex held on a quorum of independent Redis masters.

The backend is :class:`django_redislock.backends.redlock.RedlockBackend`; this
package holds its parts: the masters (:mod:`.masters`), the lock
(:mod:`.lock`) and the merged admin listing (:mod:`.listing`).
"""

from __future__ import annotations

from .lock import RedlockLock
from .masters import Master

__all__ = ["Master", "RedlockLock"]
