"""The client side of one lock object's hold: who may use it, grants, releases and losses.

:class:`HoldKeeping` is the part of :class:`~django_redislock.locking.base.BaseLock`
that turns script results into hold state and tells the holder about it: the
usage checks (one object per thread or task; a forked child cannot release its
parent's hold), the ``lock_acquired`` / ``lock_released`` / ``lock_lost``
signals, the ``on_lost`` callback, the watchdog registration and
:class:`~django_redislock.exceptions.LockLost`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from .. import signals
from ..calls.node import Backend
from ..exceptions import LockLost, LockNotOwned, LockUsageError
from . import timings
from .owners import Hold, current_user
from .watchdog import watchdog as _watchdog

logger = logging.getLogger("django_redislock.locks")


class HoldKeeping:
    """Hold state of a lock object (see the module docstring)."""

    backend: Backend
    name: str
    kind: str
    watchdog: bool
    on_lost: Callable[[Any], None] | None
    _hold: Hold | None
    _lost_hold: Hold | None
    _wait_started: float
    _state: threading.Lock

    def _check_user(self, user: str, action: str) -> Hold | None:
        hold = self._hold
        if hold is not None and hold.user != user:
            if hold.user.split(":")[:2] != user.split(":")[:2]:
                raise LockUsageError(
                    f"lock {self.name!r} was acquired by the parent of this forked process; "
                    f"only the parent can {action} it",
                    name=self.name,
                )
            raise LockUsageError(
                f"lock {self.name!r} is held by another thread or task of this process; "
                f"create one lock object per thread or task instead of sharing it ({action})",
                name=self.name,
            )
        return hold

    def _before_acquire(self, user: str) -> Hold | None:
        hold = self._check_user(user, "acquire")
        if hold is not None and not self._reentrant_object():
            raise LockUsageError(
                f"lock {self.name!r} is already held by this object; use reentrant=True "
                f"to take it again",
                name=self.name,
            )
        return hold

    def _reentrant_object(self) -> bool:
        return False

    def _level_id(self) -> str:
        """The id of the level the acquire in progress entered ("" when levels are not kept).

        A reentrant hold's levels each have their own deadline in Redis (see
        ``lock_acquire.lua``), named by the request id of the acquire that entered them.
        """
        return ""

    def _levels_done(self, hold: Hold) -> None:
        """The latest level ended (or was given up): forget its id."""
        del hold.levels[max(hold.count, 0) :]

    def _granted(self, owner: str, user: str, result: Any) -> bool:
        if int(result[0]) != 1:
            return False
        fence = int(result[1])
        stale: Hold | None = None
        with self._state:
            hold = self._hold
            if hold is not None and hold.fence == fence and not hold.lost:
                hold.count += 1  # a re-entry continues this hold (same grant, same fence)
                if hold.levels:
                    hold.levels.append(self._level_id())
            else:
                # A first grant, or a re-entry that found its old hold gone and got a new
                # grant: the old hold was lost (and is reported below); the new one starts
                # its own count and fence.
                stale = hold
                self._hold = Hold(owner, fence, user)
                level = self._level_id()
                if level:
                    self._hold.levels.append(level)
                self._lost_hold = None
                if self.watchdog:
                    _watchdog.register(self)
        if stale is not None:
            self._report_lost(stale)
        waited = time.monotonic() - self._wait_started if self._wait_started else 0.0
        timings.granted(self.backend.alias, self.kind, self.name, fence, waited)
        if signals.lock_acquired.receivers:  # a send with none returns [] (no call, no kwargs)
            signals.lock_acquired.send(
                sender=type(self),
                alias=self.backend.alias,
                name=self.name,
                fence=fence,
                waited=waited,
                kind=self.kind,
            )
        return True

    def _require_hold(self, action: str) -> Hold:
        user = current_user()[0]
        hold = self._check_user(user, action)
        lost = self._lost_hold
        if hold is None and lost is not None and lost.user == user and not lost.told:
            if action == "release":
                lost.told = True  # told once; a second release is a usage error
            raise self._lost_error(lost)
        if hold is None:
            raise LockNotOwned(
                f"cannot {action} lock {self.name!r}: this lock object does not hold it",
                name=self.name,
            )
        return hold

    def _hold_to_check(self) -> Hold:
        """The hold ``ensure_held`` asks Redis about; :class:`LockLost` if already known lost."""
        hold = self._require_hold("check")
        if hold.lost:
            raise self._lost_error(hold)
        return hold

    def _forget(self, hold: Hold) -> None:
        with self._state:
            if self._hold is hold:
                self._hold = None
        if self.watchdog:
            _watchdog.unregister(self)

    def _release_started(self, hold: Hold) -> bool:
        """Before a release is sent: True when it ends this object's hold.

        The watchdog stops renewing a hold as soon as its last release is on its way,
        whether that release then succeeds, fails or is cancelled: at worst the hold
        ends by its TTL, never kept alive by a process that tried to give it up. The
        renewal that may already be in flight then finds the hold gone, which is not a
        loss (see :meth:`Watchdog._renewed`).
        """
        if hold.count > 1:
            return False
        hold.releasing = True
        if self.watchdog:
            _watchdog.unregister(self)
        return True

    def _release_failed(self, hold: Hold) -> None:
        """A release whose outcome is unknown (error, timeout, cancellation).

        The object gives the step up as if it had applied: a last release forgets the
        hold (Redis ends it by its TTL at worst; the resent release would be a no-op); a
        partial reentrant release counts down, so the object never believes it holds
        while Redis might have released (the opposite error only keeps the lock a TTL).
        """
        hold.count -= 1
        self._levels_done(hold)
        if hold.count <= 0:
            hold.releasing = True
            self._forget(hold)

    def _released(self, hold: Hold, result: Any) -> None:
        code = int(result[0])
        hold.count -= 1
        self._levels_done(hold)
        if code == 0:
            self._forget(hold)
            self._report_lost(hold)
            if self._lost_hold is hold:
                hold.told = True  # LockLost below tells it; the fence stays readable
            raise LockLost(
                f"lock {self.name!r} was lost before release (expired, stolen or "
                f"force-released); fence {hold.fence}",
                name=self.name,
            )
        if hold.count <= 0:  # code 2 (a resent release) counts as the release it repeats
            hold.releasing = True
            self._forget(hold)
            timings.released(self.backend.alias, self.name, hold.fence)
            if signals.lock_released.receivers:
                signals.lock_released.send(
                    sender=type(self), alias=self.backend.alias, name=self.name, fence=hold.fence
                )

    def _report_lost(self, hold: Hold) -> None:
        """Tell the holder once that the hold ended: the signal and the callback."""
        with self._state:
            if hold.lost:
                return
            hold.lost = True
            if self._hold is hold:
                self._hold = None
            if self._hold is None:  # a newer hold of this object is not hidden by the old one
                self._lost_hold = hold
        timings.lost(self.backend.alias, self.name, hold.fence)
        signals.lock_lost.send(
            sender=type(self), alias=self.backend.alias, name=self.name, fence=hold.fence
        )
        if self.on_lost is not None:
            try:
                self.on_lost(self)
            except Exception:
                logger.exception("on_lost callback of lock %r failed", self.name)

    def _lost_error(self, hold: Hold) -> LockLost:
        return LockLost(
            f"lock {self.name!r} is no longer held (expired, stolen or force-released); "
            f"fence {hold.fence}",
            name=self.name,
        )

    def _checked(self, hold: Hold, pttl: Any) -> None:
        if int(pttl) <= 0:
            self._forget(hold)
            self._report_lost(hold)
            raise self._lost_error(hold)
