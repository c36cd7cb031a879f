"""The fair lock: granted in arrival order across processes, waiters woken one at a time.

``locks["default"].fair_lock("report")`` is a mutex (same fence, watchdog, ``on_lost``,
release and context managers as :class:`~.mutex.Lock`) whose waiters form a queue in
Redis. Keys, all in the lock name's bucket slot (see :mod:`.keys`)::

    <base>:fl:<name>            hash  the hold: o=owner token, f=fence, m=holder metadata
    <base>:fq:<name>            zset  the queue: owner token -> arrival number
    <base>:fw:<name>            zset  wait-leases: owner token -> lease deadline (ms)
    <base>:fs:<name>:<token>    list  one waiter's own wake-up list
    <base>:ix:c                 zset  the bucket's coordination index: fl:<name> -> latest
                                      deadline while in use (see :mod:`.coordindex`)

A waiting acquire queues its call's owner token once (``fair_acquire.lua``) and then blocks
on its own wake-up list. A release (or a waiter that leaves) returns the first live waiter
when the lock is free, and the releasing client pushes that waiter's list
(``fair_wake.lua``): exactly the next waiter wakes, and its try is granted. Nobody polls:
a waiter's only other wake-ups are its wait-lease renewals (every quarter lease), which are
also tries, and the holder's TTL ending.

A waiter that is cancelled, times out or is interrupted leaves the queue at once
(``fair_release.lua`` with ``"*"``), waking the next one if the lock is free. A waiter
whose process dies stops renewing its wait-lease, and the next try or release of anyone
drops it once the lease lapses (``wait_lease``, 2 s by default): it never blocks the queue
behind it for longer than that. A waiter stalled past its own lease (a long GC pause, a
SIGSTOP) loses its place and queues again at the back on its next try.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from ..calls.node import Backend
from ..exceptions import ConnectionFailed
from .base import SIGNAL_MS, BaseLock
from .calls import ABANDON_SECONDS, clean_up
from .keys import check_seconds, name_keys, to_ms
from .owners import Hold, new_token

logger = logging.getLogger("django_redislock.locks")

Call = tuple[str, list[str], list[Any]]

#: Default wait-lease of a queued waiter (seconds): a crashed waiter is skipped after it.
WAIT_LEASE = 2.0
#: A waiter renews its lease (and tries again) when this fraction of it has passed.
LEASE_RENEW_FRACTION = 0.25


class FairLock(BaseLock):
    """A distributed mutex granted in arrival order (see the module docs).

    Build it with ``locks[alias].fair_lock(name, ...)``. Every acquire call is one waiter
    with its own owner token; the object itself is used like :class:`~.mutex.Lock`.
    """

    kind = "fair"

    def __init__(
        self, backend: Backend, name: str, *, wait_lease: float = WAIT_LEASE, **kwargs: Any
    ) -> None:
        super().__init__(backend, name, **kwargs)
        self.wait_lease = check_seconds(wait_lease, "wait_lease")
        base, ix = name_keys(backend, self.name)
        self._key = f"{base}:fl:{self.name}"
        self._queue_key = f"{base}:fq:{self.name}"
        self._lease_key = f"{base}:fw:{self.name}"
        self._wake_base = f"{base}:fs:{self.name}:"
        self._acquire_keys = [
            self._key,
            ix.fence,
            ix.released,
            self._queue_key,
            self._lease_key,
            ix.coord,
        ]
        self._release_keys = [
            self._key,
            self._queue_key,
            self._lease_key,
            ix.released,
            ix.fence,
            ix.coord,
        ]
        self._extend_keys = [self._key, ix.coord]

    # -- the calls ---------------------------------------------------------------------------

    def _owner_for_attempt(self, user: str) -> str:
        token = new_token()
        self._signal_key = self._wake_base + token  # this acquire call's own wake-up list
        return token

    def _attempt(
        self, owner: str, meta: str, blocking: bool, remaining: float, waited: bool = False
    ) -> Call:
        wait = "1" if waited or (blocking and remaining > 0) else "0"
        args = [owner, to_ms(self.ttl), meta, wait, to_ms(self.wait_lease)]
        return "fair_acquire", self._acquire_keys, args

    def _release_call(self, hold: Hold) -> Call:
        return "fair_release", self._release_keys, [hold.owner, hold.fence]

    def _abandon_call(self, owner: str) -> Call:
        return "fair_release", self._release_keys, [owner, "*"]

    def _stop_waiting_call(self, owner: str) -> Call | None:
        return self._abandon_call(owner)

    def _extend_call(self, hold: Hold, ttl_ms: int) -> Call:
        return "fair_extend", self._extend_keys, [hold.owner, hold.fence, ttl_ms]

    def _wake_call(self, token: str) -> Call:
        return "fair_wake", [self._wake_base + token], [SIGNAL_MS]

    def _send_wake(self, token: str) -> None:
        # not a prepared call: each waiter's list is another key, used once
        _, keys, args = self._wake_call(token)
        with self.backend.errors():
            self.backend.script("fair_wake")(keys=keys, args=args)

    async def _send_wake_async(self, token: str) -> None:
        _, keys, args = self._wake_call(token)
        client = self.backend.async_client()
        with self.backend.errors():
            await self.backend.script("fair_wake", client)(keys=keys, args=args)

    def _block_seconds(self, deadline: float, wait_ms: int) -> float | None:
        """Block until woken, the holder's TTL ends or the wait-lease needs renewing."""
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return None
        renew = self.wait_lease * LEASE_RENEW_FRACTION
        holder_left = (wait_ms + 1) / 1000 if wait_ms > 0 else renew
        return max(0.001, min(holder_left, remaining, renew, self._max_block()))

    # -- waking the next waiter ----------------------------------------------------------------

    def _wake(self, result: Any) -> None:
        token = _next_of(result)
        if token:
            try:
                self._send_wake(token)
            except Exception as exc:  # the waiter's next lease renewal finds the lock free
                logger.warning("fair lock %r: could not wake the next waiter: %s", self.name, exc)

    async def _wake_async(self, result: Any) -> None:
        token = _next_of(result)
        if not token:
            return
        try:
            await self._send_wake_async(token)
        except ConnectionFailed as exc:
            logger.warning("fair lock %r: could not wake the next waiter: %s", self.name, exc)
        except BaseException:  # cancelled: the push still goes out (shielded, bounded)
            await self._finish_async(self._wake_call(token))
            raise

    def _leave(self, owner: str) -> None:
        """Leave the queue and take back a grant this call may have got; wake the next."""
        try:
            result = self._call_plain(self._abandon_call(owner))
        except Exception as exc:
            logger.warning("fair lock %r: could not leave the queue: %s", self.name, exc)
            return
        self._wake(result)

    async def _leave_async(self, owner: str) -> None:
        """The asyncio twin of :meth:`_leave`: a task of its own that a cancellation cannot cut.

        The caller waits for it as for any clean-up (:func:`~.calls.clean_up`): at most
        ``ABANDON_SECONDS``, while the leave itself runs until Redis answers.
        """
        wait = min(ABANDON_SECONDS, float(self.backend.options["SOCKET_TIMEOUT"]))
        await clean_up(self._leave_now(owner), wait)

    async def _leave_now(self, owner: str) -> None:
        try:
            result = await self._acall(self._abandon_call(owner))
            token = _next_of(result)
            if token:
                await self._send_wake_async(token)
        except Exception as exc:
            logger.warning("fair lock %r: could not leave the queue: %s", self.name, exc)

    def _abandon(self, owner: str) -> None:
        self._leave(owner)

    async def _abandon_async(self, owner: str) -> None:
        await self._leave_async(owner)

    def _stop_waiting(self, owner: str) -> None:
        self._leave(owner)

    async def _stop_waiting_async(self, owner: str) -> None:
        await self._leave_async(owner)

    # -- the public API ----------------------------------------------------------------------

    def release(self) -> None:
        """Release the hold and wake the first live waiter; see :meth:`BaseLock.release`."""
        hold = self._require_hold("release")
        self._release_started(hold)
        result = self._send_end(hold, self._release_call(hold))
        try:
            self._released(hold, result)
        finally:
            self._wake(result)

    async def release_async(self) -> None:
        """The asyncio twin of :meth:`release`."""
        hold = self._require_hold("release")
        self._release_started(hold)
        result = await self._send_end_async(hold, self._release_call(hold))
        try:
            self._released(hold, result)
        finally:
            await self._wake_async(result)

    def locked(self) -> bool:
        """True when anyone holds the lock (one round trip)."""
        with self.backend.errors():
            return bool(self.backend.client.exists(self._key))

    async def locked_async(self) -> bool:
        """The asyncio twin of :meth:`locked`."""
        with self.backend.errors():
            return bool(await self.backend.async_client().exists(self._key))

    def waiting(self) -> int:
        """How many live waiters are queued (one round trip; a lapsed one may still count)."""
        with self.backend.errors():
            return int(self.backend.client.zcard(self._queue_key))


def _next_of(result: Any) -> str:
    """The waiter a release or a leave named to wake ("" for none)."""
    token = result[1] if len(result) > 1 else b""
    return token.decode() if isinstance(token, bytes) else str(token or "")


__all__ = ["FairLock"]
