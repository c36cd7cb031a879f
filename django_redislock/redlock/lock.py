"""The Redlock mutex: the single-server lock scripts, run on every master, counted by quorum.

One attempt (see :meth:`.quorum.QuorumMutex._try`, which holds every call on all masters):

1. note the monotonic time, run ``lock_acquire`` on every master in parallel;
2. count the masters that granted and are not quarantined; with a quorum
   (``N // 2 + 1``) and time left (``ttl - elapsed - drift``), take the largest
   of their fences as the grant's fence and write it, with ``redlock_fence``,
   on every master (conditionally where the grant holds, as a counter floor
   everywhere); the grant stands if a quorum still held when that landed and
   the validity has not run out;
3. otherwise release whatever was taken, on every master.

The fence is therefore strictly larger than that of every earlier grant whose
fence write reached one of the masters in this grant's quorum before this
grant; see ``docs/scale.md`` for the exact statement.

Waiting: an attempt that finds the lock held marks the holds (``w``), so the
holder's release pushes the wake-up list on each master, and the waiter blocks
on one of them (``BLPOP``) for at most the holder's remaining time. When no one
holds a quorum (masters down, or a split between contenders) there is no
release to wait for and the waiter sleeps a random pause below ``RETRY_DELAY``.

The asyncio methods ask the masters concurrently on the running loop (one
``redis.asyncio`` client per master and loop). An attempt runs as its own task,
shielded from the caller: a cancelled ``acquire_async`` lets the attempt finish
(no master's reply is cut off unread, so what it was granted is known) and
then releases that grant on every master, so a cancellation never leaves a
grant that nothing owns or that the watchdog renews. A cancelled
``release_async`` stops the renewal and lets the release complete.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from typing import Any

from ..exceptions import ConnectionFailed, LockNotOwned
from ..locking.owners import Hold, current_user
from ..locking.wait import wait_for_signal, wait_for_signal_async
from .quorum import Outcome, QuorumMutex

#: Longest single block on a master's wake-up list before the masters are asked again.
MAX_BLOCK = 2.0

logger = logging.getLogger("django_redislock.redlock")

#: Cleanups after cancelled calls that outlived their caller's wait (strong references).
_CLEANUPS: set[asyncio.Future[None]] = set()


def _cleanup_done(task: asyncio.Future[None]) -> None:
    _CLEANUPS.discard(task)
    if not task.cancelled() and task.exception() is not None:
        logger.warning("cleanup after a cancelled Redlock call failed", exc_info=task.exception())


class RedlockLock(QuorumMutex):
    """A mutex held on a quorum of independent masters (not reentrant)."""

    # -- acquire -------------------------------------------------------------------------------

    def _start(self, user: tuple[str, str, str | None], timeout: float) -> tuple[str, str, float]:
        """What both acquire loops share: the usage check, the owner, the meta, the deadline."""
        self._before_acquire(user[0])
        self._wait_started = time.monotonic()  # for lock_acquired's ``waited`` (metrics)
        owner = self._owner_for_attempt(user[0])
        return owner, self.meta(*user[1:]), self._wait_started + timeout

    def _acquire(self, user: tuple[str, str, str | None], blocking: bool, timeout: float) -> bool:
        owner, meta, deadline = self._start(user, timeout)
        waited = False
        while True:
            remaining = deadline - time.monotonic()
            mode = 2 if waited else int(blocking and remaining > 0)
            outcome = self._try(owner, meta, mode, remaining)
            if outcome.fence:
                self._valid_until = outcome.valid_until
                return self._granted(owner, user[0], [1, outcome.fence])
            left = deadline - time.monotonic()
            if not blocking or left <= 0:
                return self._refused(outcome)
            self._pause(outcome, left)
            waited = True

    async def _acquire_async(
        self, user: tuple[str, str, str | None], blocking: bool, timeout: float
    ) -> bool:
        owner, meta, deadline = self._start(user, timeout)
        waited = False
        while True:
            remaining = deadline - time.monotonic()
            mode = 2 if waited else int(blocking and remaining > 0)
            # The attempt runs as its own task: a cancellation of this call must not cut a
            # master's reply off unread (its grant would then be unknown), so the attempt is
            # finished and its grant, if any, removed (see _abandon_attempt).
            attempt = asyncio.ensure_future(self._try_async(owner, meta, mode, remaining))
            try:
                outcome = await asyncio.shield(attempt)
            except asyncio.CancelledError:
                await self._bounded(self._abandon_attempt(attempt, owner), "acquire")
                raise
            if outcome.fence:
                self._valid_until = outcome.valid_until
                return self._granted(owner, user[0], [1, outcome.fence])
            left = deadline - time.monotonic()
            if not blocking or left <= 0:
                return self._refused(outcome)
            await self._pause_async(outcome, left)
            waited = True

    async def _abandon_attempt(self, attempt: asyncio.Future[Outcome], owner: str) -> None:
        """After a cancelled acquire: let the attempt finish, then remove what it was granted.

        An attempt that failed on its own has already released its partial grants;
        one that raised leaves its outcome unknown, so a fresh token is released
        everywhere (an explicit owner may hold the lock from elsewhere: left to its TTL).
        """
        try:
            outcome = await attempt
        except Exception:
            if owner != self.owner:
                await self._release_everywhere_async(owner)
            return
        if outcome.fence:
            await self._release_everywhere_async(owner)

    async def _bounded(self, cleanup: Any, action: str) -> None:
        """Run ``cleanup`` after a cancellation, waiting for it at most ``MASTER_TIMEOUT``.

        Past that, or if the caller is cancelled again, it goes on in the background
        (bounded itself by the masters' timeouts) and the cancellation proceeds.
        """
        task = asyncio.ensure_future(cleanup)
        _CLEANUPS.add(task)
        task.add_done_callback(_cleanup_done)
        try:
            await asyncio.wait_for(
                asyncio.shield(task), float(self.redlock.options["MASTER_TIMEOUT"])
            )
        except (asyncio.TimeoutError, asyncio.CancelledError):
            logger.warning(
                "lock %r: the cleanup after a cancelled %s goes on in the background",
                self.name,
                action,
            )

    def _refused(self, outcome: Outcome) -> bool:
        if outcome.reachable < self.redlock.quorum:
            raise ConnectionFailed(
                f"lock {self.name!r}: only {outcome.reachable} of {len(self.redlock.masters)} "
                f"Redlock masters of REDISLOCK_LOCKS[{self.redlock.alias!r}] answered; a grant "
                f"needs {self.redlock.quorum}"
            )
        return False

    def _pause(self, outcome: Outcome, left: float) -> None:
        if outcome.wait_on is None:
            pause = random.uniform(0.2, 1.0) * self.redlock.options["RETRY_DELAY"]
            time.sleep(min(left, pause))
            return
        seconds = min(left, (outcome.wait_ms + 1) / 1000, MAX_BLOCK)
        try:
            wait_for_signal(outcome.wait_on, self._signal_key, max(0.001, seconds))
        except ConnectionFailed:
            time.sleep(min(left, self.redlock.options["RETRY_DELAY"]))

    async def _pause_async(self, outcome: Outcome, left: float) -> None:
        if outcome.wait_on is None:
            pause = random.uniform(0.2, 1.0) * self.redlock.options["RETRY_DELAY"]
            await asyncio.sleep(min(left, pause))
            return
        seconds = min(left, (outcome.wait_ms + 1) / 1000, MAX_BLOCK)
        try:
            await wait_for_signal_async(outcome.wait_on, self._signal_key, max(0.001, seconds))
        except ConnectionFailed:
            await asyncio.sleep(min(left, self.redlock.options["RETRY_DELAY"]))

    def acquire(self, blocking: bool | None = None, timeout: float | None = None) -> bool:
        """Take the lock on a quorum of masters; wait up to ``timeout`` seconds when ``blocking``.

        Returns False when the lock stayed held; raises :class:`ConnectionFailed`
        when, at the end of the wait, fewer than a quorum of masters answered.
        """
        blocking, timeout = self._wait_args(blocking, timeout)
        return self._acquire(current_user(), blocking, timeout)

    async def acquire_async(
        self, blocking: bool | None = None, timeout: float | None = None
    ) -> bool:
        """The asyncio twin of :meth:`acquire`: the masters are asked in parallel on the loop.

        Cancelled at any await, it leaves no grant behind: the attempt in flight is
        finished and whatever it was granted is released on every master, waiting
        at most ``MASTER_TIMEOUT`` for that before the cancellation goes on.
        """
        blocking, timeout = self._wait_args(blocking, timeout)
        return await self._acquire_async(current_user(), blocking, timeout)

    # -- release, extend, checks ---------------------------------------------------------------

    def _release_result(self, hold: Hold) -> list[int]:
        """The result the single-server release script would give, decided by quorum."""
        return self._release_verdict(hold, self._release_everywhere(hold.owner))

    async def _release_result_async(self, hold: Hold) -> list[int]:
        return self._release_verdict(hold, await self._release_everywhere_async(hold.owner))

    def _release_verdict(self, hold: Hold, counts: tuple[int, int]) -> list[int]:
        """Released (``[1, 0, fence]``) only while the validity lasts, else lost (``[0, 0]``).

        Past the validity a quorum may still have held the keys, but the grant no
        longer promised exclusion (another client may already have been granted
        the lock by masters whose clocks ran ahead), so the release reports the
        hold as lost: the caller learns that its work may have overlapped another.
        """
        released, unreachable = counts
        quorum = self.redlock.quorum
        if time.monotonic() < self._valid_until and released + unreachable >= quorum:
            return [1, 0, hold.fence]
        return [0, 0]

    def _foreign(self) -> bool:
        return self._hold is None and self.owner is not None

    def release(self) -> None:
        """Release on every master; raise :class:`LockLost` if the hold had already ended.

        The hold counts as ended once its validity ran out, even when a quorum of
        masters still had it (see ``docs/scale.md``).
        """
        if self._foreign():
            return self._foreign_done(self._release_everywhere(str(self.owner))[0])
        hold = self._require_hold("release")
        self._release_started(hold)  # the watchdog leaves it: a renewal in flight is no loss
        self._released(hold, self._release_result(hold))

    async def release_async(self) -> None:
        """The asyncio twin of :meth:`release`, the masters asked in parallel on the loop.

        Cancelled while the masters answer, the hold is no longer renewed, and the
        release goes on (waited for at most ``MASTER_TIMEOUT``, then in the
        background) so that the lock ends now rather than by TTL.
        """
        if self._foreign():
            released = await self._release_everywhere_async(str(self.owner))
            return self._foreign_done(released[0])
        hold = self._require_hold("release")
        self._release_started(hold)
        task = asyncio.ensure_future(self._release_result_async(hold))
        try:
            result = await asyncio.shield(task)
        except asyncio.CancelledError:
            self._forget(hold)
            await self._bounded(_finish(task), "release")
            raise
        self._released(hold, result)

    def _foreign_done(self, released: int) -> None:
        if released == 0:
            raise LockNotOwned(
                f"owner {self.owner!r} does not hold lock {self.name!r}", name=self.name
            )

    def _quorum_checked(self, hold: Hold, result: int | Exception) -> None:
        if isinstance(result, Exception):
            raise result
        self._checked(hold, result)

    def extend(self, ttl: float | None = None) -> None:
        """Reset the hold to ``ttl`` seconds on a quorum of masters."""
        seconds = self.ttl if ttl is None else self._ttl_ms(ttl) / 1000
        self._check_ttl(seconds, "ttl")
        hold = self._require_hold("extend")
        self._quorum_checked(hold, self.quorum_extend(hold, seconds))

    async def extend_async(self, ttl: float | None = None) -> None:
        """The asyncio twin of :meth:`extend`."""
        seconds = self.ttl if ttl is None else self._ttl_ms(ttl) / 1000
        self._check_ttl(seconds, "ttl")
        hold = self._require_hold("extend")
        self._quorum_checked(hold, await self.quorum_extend_async(hold, seconds))

    def ensure_held(self) -> None:
        """Raise :class:`LockLost` unless the hold is still valid and not denied by a quorum."""
        hold = self._hold_to_check()
        self._quorum_checked(hold, self.quorum_extend(hold, 0))

    async def ensure_held_async(self) -> None:
        """The asyncio twin of :meth:`ensure_held`."""
        hold = self._hold_to_check()
        self._quorum_checked(hold, await self.quorum_extend_async(hold, 0))

    def owned(self) -> bool:
        """True when this object's hold is still valid (one parallel round trip)."""
        hold = self._hold
        if hold is None or hold.lost:
            return False
        result = self.quorum_extend(hold, 0)
        return not isinstance(result, Exception) and result > 0

    async def owned_async(self) -> bool:
        """The asyncio twin of :meth:`owned`."""
        hold = self._hold
        if hold is None or hold.lost:
            return False
        result = await self.quorum_extend_async(hold, 0)
        return not isinstance(result, Exception) and result > 0

    def renew_result(self, hold: Hold) -> int | Exception:
        """What the watchdog's renewal of ``hold`` found (see :meth:`quorum_extend`)."""
        return self.quorum_extend(hold, self.ttl)


async def _finish(task: asyncio.Future[Any]) -> None:
    """Wait for ``task`` (a call whose caller was cancelled); its result no longer matters."""
    await task
