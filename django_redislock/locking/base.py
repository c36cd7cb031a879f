"""What every kind of lock shares: arguments, owners, the wait loop and the public API.

A lock object holds at most one hold at a time and belongs, while it holds, to
the thread or asyncio task that acquired it. The Redis side is one script per
state change (see :mod:`django_redislock.locking.keys` for the key layout). How
those calls are sent, resent and taken back is in :mod:`.calls`; how their
results become hold state (signals, ``on_lost``, the watchdog) in :mod:`.holding`.

Waiting never polls on a fixed interval: a failed acquire returns how long the
current holder has left, and the waiter blocks on the lock's signal list
(``BLPOP``) for at most that long. A release pushes to the list, so the waiter
wakes within a round trip; an expiry pushes nothing, but the waiter's block ends
when the holder's TTL does. Every block also stays below ``SOCKET_TIMEOUT``.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from .. import signals
from ..calls.node import Backend
from ..exceptions import ConnectionFailed, InvalidArgument, LockNotAcquired, LockNotOwned
from . import timings
from .calls import LockCalls
from .keys import check_name, check_seconds, to_ms
from .owners import Hold, check_owner, current_user, holder_meta, new_token
from .transport import ScriptCalls
from .wait import wait_for_signal, wait_for_signal_async

_L = TypeVar("_L", bound="BaseLock")

#: How long a wake-up signal outlives a release nobody was waiting for (ms).
SIGNAL_MS = 1000
#: Longest a waiter's entry in the waiters zset lasts without a retry renewing it (seconds):
#: a caller that waits without a timeout is not recorded for ever.
WAIT_RECORD_CAP = 3600.0
#: Fraction of ``SOCKET_TIMEOUT`` one blocking read may use.
BLOCK_FRACTION = 0.8
#: First pause (seconds) before a waiter whose wait failed checks that Redis answers again.
WAIT_FAILED_PAUSE = 0.05


class BaseLock(LockCalls):
    """Arguments, the wait loop, the public API and the context managers.

    Subclasses provide the script calls (see :class:`~.calls.LockCalls`): one
    acquire try, a release, an extension, the take-back of a grant, and the
    signal key a release pushes.
    """

    kind = "mutex"
    #: True when the subclass takes its :class:`ScriptCalls` from a cache (no object each)
    _shared_scripts = False

    def __init__(
        self,
        backend: Backend,
        name: str,
        *,
        ttl: float | None = None,
        timeout: float | None = None,
        blocking: bool = True,
        owner: str | None = None,
        watchdog: bool | None = None,
        on_lost: Callable[[Any], None] | None = None,
    ) -> None:
        self.backend = backend
        self.name = check_name(name)
        self.ttl = backend.options["DEFAULT_TTL"] if ttl is None else check_seconds(ttl, "ttl")
        self.timeout = (
            backend.options["DEFAULT_TIMEOUT"]
            if timeout is None
            else check_seconds(timeout, "timeout", allow_zero=True)
        )
        if not isinstance(blocking, bool):
            raise InvalidArgument(f"blocking must be True or False, not {blocking!r}")
        self.blocking = blocking
        self.owner = check_owner(owner)
        self.watchdog = (ttl is None) if watchdog is None else bool(watchdog)
        if on_lost is not None and not callable(on_lost):
            raise InvalidArgument(f"on_lost must be callable, not {on_lost!r}")
        self.on_lost = on_lost
        self._hold: Hold | None = None
        self._lost_hold: Hold | None = None  # the last hold, once known lost
        self._wait_started = 0.0
        self._state = threading.Lock()
        if not self._shared_scripts:
            self._scripts = ScriptCalls()

    def __repr__(self) -> str:
        state = f"fence={self._hold.fence}" if self._hold else "not held"
        return f"<{type(self).__name__} {self.name!r} {state}>"

    def _owner_for_attempt(self, user: str) -> str:
        return self.owner or new_token()

    # -- arguments ---------------------------------------------------------------------------

    def _wait_args(self, blocking: bool | None, timeout: float | None) -> tuple[bool, float]:
        blocking = self.blocking if blocking is None else blocking
        if not isinstance(blocking, bool):
            raise InvalidArgument(f"blocking must be True or False, not {blocking!r}")
        if timeout is None:
            return blocking, self.timeout
        return blocking, check_seconds(timeout, "timeout", allow_zero=True)

    def _max_block(self) -> float:
        return float(self.backend.options["SOCKET_TIMEOUT"]) * BLOCK_FRACTION

    def _block_seconds(self, deadline: float, wait_ms: int) -> float | None:
        """Seconds to block for the next signal, or None when the wait is over."""
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return None
        holder_left = (wait_ms + 1) / 1000 if wait_ms > 0 else 0.001
        return max(0.001, min(holder_left, remaining, self._max_block()))

    def meta(self, thread: str, task: str | None) -> str:
        """The holder metadata a grant stores for the admin (JSON)."""
        return holder_meta(self.kind, thread, task, self.ttl)

    # -- the public API ----------------------------------------------------------------------

    @property
    def fence(self) -> int:
        """The fencing token of the current hold (strictly increasing per lock name).

        Once the hold is known to be lost (expired, force-released), this stays
        the lost hold's fence: a fenced write made with it is then refused by the
        resource, which is the point of fencing. Raises :class:`LockNotOwned`
        when this object never held the lock or released it.
        """
        hold = self._hold or self._lost_hold
        if hold is None:
            raise LockNotOwned(f"lock {self.name!r} is not held by this object", name=self.name)
        return hold.fence

    def locked(self) -> bool:
        """True when anyone holds the lock (one round trip)."""
        raise NotImplementedError

    async def locked_async(self) -> bool:
        """The asyncio twin of :meth:`locked`."""
        raise NotImplementedError

    def held_by_me(self) -> bool:
        """True when this object holds the lock as far as it knows (no round trip)."""
        hold = self._hold
        return hold is not None and not hold.lost

    def _start_acquire(
        self, blocking: bool | None, timeout: float | None
    ) -> tuple[bool, Any, str, str, float]:
        """What the sync and async acquire loops share: checked arguments, owner, deadline."""
        blocking, timeout = self._wait_args(blocking, timeout)
        user = current_user()
        self._before_acquire(user[0])
        self._wait_started = time.monotonic()  # for the signal's ``waited`` (lock metrics)
        owner = self._owner_for_attempt(user[0])
        self._rid = self._request_id()
        return blocking, user, owner, self.meta(*user[1:]), self._wait_started + timeout

    def acquire(self, blocking: bool | None = None, timeout: float | None = None) -> bool:
        """Take the lock; wait up to ``timeout`` seconds when ``blocking``. True if granted.

        An attempt whose reply is lost (a timeout, a dropped connection) is resent, which
        is safe (the scripts answer a request they already applied as the first time):
        the call then returns holding the grant it had got, or knowing it got none. If
        Redis stays unreachable, the possible grant is taken back (one best-effort call;
        at worst it ends by its TTL, never renewed) and :class:`ConnectionFailed` raised.
        """
        blocking, user, owner, meta, deadline = self._start_acquire(blocking, timeout)
        waited = False
        while True:
            remaining = deadline - time.monotonic()
            call = self._attempt(owner, meta, blocking, remaining, waited)
            try:
                result = self._call(call)
            except ConnectionFailed as exc:
                result = self._resolve(call, owner, exc)
            except BaseException:  # e.g. KeyboardInterrupt while the attempt was in flight
                self._abandon(owner)
                raise
            if self._granted(owner, user[0], result):
                return True
            seconds = self._block_seconds(deadline, int(result[1])) if blocking else None
            if seconds is None:
                if blocking:
                    self._stop_waiting(owner)
                self._not_granted(blocking)
                return False
            try:
                self._woken = wait_for_signal(self.backend, self._signal_key, seconds)
            except ConnectionFailed as exc:
                self._wait_failed(deadline, exc)
            waited = True

    async def acquire_async(
        self, blocking: bool | None = None, timeout: float | None = None
    ) -> bool:
        """The asyncio twin of :meth:`acquire`.

        Cancelled while an attempt is in flight, it takes back that attempt's possible
        grant (a grant that arrives later is refused by the script): nothing is left held
        or renewed. The cancellation goes on once the take-back is answered, or after
        ``ABANDON_SECONDS`` at most; a slower take-back still lands, in the background,
        unless the client's own timeouts give up on Redis first.
        """
        blocking, user, owner, meta, deadline = self._start_acquire(blocking, timeout)
        waited = False
        while True:
            remaining = deadline - time.monotonic()
            call = self._attempt(owner, meta, blocking, remaining, waited)
            try:
                result = await self._acall(call)
            except ConnectionFailed as exc:
                result = await self._resolve_async(call, owner, exc)
            except BaseException:  # a cancellation at the await
                await self._abandon_async(owner)
                raise
            if self._granted(owner, user[0], result):
                return True
            seconds = self._block_seconds(deadline, int(result[1])) if blocking else None
            if seconds is None:
                if blocking:
                    await self._stop_waiting_async(owner)
                self._not_granted(blocking)
                return False
            try:
                self._woken = await wait_for_signal_async(self.backend, self._signal_key, seconds)
            except ConnectionFailed as exc:
                await self._wait_failed_async(deadline, exc)
            except BaseException:  # a cancellation while waiting: withdraw what the wait left
                await self._stop_waiting_async(owner)
                raise
            waited = True

    def _not_granted(self, blocking: bool) -> None:
        """Count the refusal for the metrics and tell the ``lock_not_acquired`` receivers."""
        timings.not_granted(self.backend.alias, self.kind, blocking)
        signals.lock_not_acquired.send(
            sender=type(self),
            alias=self.backend.alias,
            name=self.name,
            kind=self.kind,
            blocking=blocking,
        )

    def _wait_failed(self, deadline: float, exc: ConnectionFailed) -> None:
        """A wait for a wake-up ended by a connection error (a cut connection, a restart).

        The wait changed nothing, so the loop goes on (docs/calls.md): once Redis answers
        a read of the signal key again (tried at once, then after pauses doubling from
        ``WAIT_FAILED_PAUSE`` up to 1 s), the next attempt is sent. ``exc`` is raised if
        Redis does not answer before the caller's deadline.
        """
        pause = WAIT_FAILED_PAUSE
        while True:
            try:
                with self.backend.errors():
                    self.backend.client.exists(self._signal_key)
                return
            except ConnectionFailed:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise exc from None
                time.sleep(min(pause, left))
                pause = min(pause * 2, 1.0)

    async def _wait_failed_async(self, deadline: float, exc: ConnectionFailed) -> None:
        """The asyncio twin of :meth:`_wait_failed`."""
        pause = WAIT_FAILED_PAUSE
        while True:
            try:
                with self.backend.errors():
                    await self.backend.async_client().exists(self._signal_key)
                return
            except ConnectionFailed:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise exc from None
                await asyncio.sleep(min(pause, left))
                pause = min(pause * 2, 1.0)

    def release(self) -> None:
        """Release one hold; raise :class:`LockLost` if it had already ended.

        A release that reaches Redis twice is a no-op the second time (the script
        remembers recent releases), so one whose reply is lost is resent until its
        outcome is known. If Redis stays unreachable, :class:`ConnectionFailed` is
        raised and the object no longer holds: nothing renews the hold, which ends by
        its TTL at worst.
        """
        hold = self._require_hold("release")
        self._release_started(hold)
        self._released(hold, self._send_end(hold, self._release_call(hold)))

    async def release_async(self) -> None:
        """The asyncio twin of :meth:`release`.

        Cancelled while the release is on its way, it sends it once more: the
        cancellation goes on once that is answered, or after ``ABANDON_SECONDS`` at most,
        while the release goes on in the background. The hold is released when Redis
        answers within the client's own timeouts, and ends by its TTL otherwise.
        """
        hold = self._require_hold("release")
        self._release_started(hold)
        self._released(hold, await self._send_end_async(hold, self._release_call(hold)))

    def _ttl_ms(self, ttl: float | None) -> int:
        return to_ms(self.ttl if ttl is None else check_seconds(ttl, "ttl"))

    def extend(self, ttl: float | None = None) -> None:
        """Renew the hold for ``ttl`` (default: the lock's ttl); it never shortens the hold.

        A reentrant hold is shared by its levels: an inner level's shorter ttl must not end
        the outer level's hold early, so the deadline only moves later. Each level also has
        its own deadline, and this moves only this object's levels: once they are released,
        the hold's TTL goes back to what the levels left asked for (docs/locks.md).
        """
        ttl_ms = self._ttl_ms(ttl)
        hold = self._require_hold("extend")
        self._checked(hold, self._call(self._extend_call(hold, ttl_ms)))

    async def extend_async(self, ttl: float | None = None) -> None:
        """The asyncio twin of :meth:`extend`."""
        ttl_ms = self._ttl_ms(ttl)
        hold = self._require_hold("extend")
        self._checked(hold, await self._acall(self._extend_call(hold, ttl_ms)))

    def ensure_held(self) -> None:
        """Raise :class:`LockLost` unless this object's hold is still live in Redis."""
        hold = self._hold_to_check()
        self._checked(hold, self._call(self._extend_call(hold, 0)))

    async def ensure_held_async(self) -> None:
        """The asyncio twin of :meth:`ensure_held`."""
        hold = self._hold_to_check()
        self._checked(hold, await self._acall(self._extend_call(hold, 0)))

    def owned(self) -> bool:
        """True when this object's hold is still live in Redis (one round trip)."""
        hold = self._hold
        if hold is None or hold.lost:
            return False
        return int(self._call(self._extend_call(hold, 0))) > 0

    async def owned_async(self) -> bool:
        """The asyncio twin of :meth:`owned`."""
        hold = self._hold
        if hold is None or hold.lost:
            return False
        return int(await self._acall(self._extend_call(hold, 0))) > 0

    def renew_call(self, hold: Hold) -> tuple[str, list[str], list[Any]]:
        """The script call the watchdog sends to renew ``hold`` for another ttl."""
        return self._extend_call(hold, to_ms(self.ttl))

    # -- context managers --------------------------------------------------------------------

    def _not_acquired(self) -> LockNotAcquired:
        return LockNotAcquired(
            f"lock {self.name!r} was held by someone else for the whole wait ({self.timeout:g} s)",
            name=self.name,
        )

    def __enter__(self: _L) -> _L:
        if not self.acquire():
            raise self._not_acquired()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()

    async def __aenter__(self: _L) -> _L:
        if not await self.acquire_async():
            raise self._not_acquired()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.release_async()
