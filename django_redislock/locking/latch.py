"""``CountDownLatch``: wait until N things have happened, across every process.

``locks["default"].latch("report:42", count=10)`` is a latch that opens once it has been
counted down 10 times; ``wait()`` blocks until then. Keys, in the latch name's lock bucket
slot (see :mod:`.keys`), so the admin can list latches from the bucket's index::

    <prefix>:{lk<b>}:ln:<name>   hash  n=remaining count, r:<request id> per count-down
    <prefix>:{lk<b>}:ls:<name>   list  one element once open: every waiter's wake-up
    <prefix>:{lk<b>}:lw:<name>   zset  waiting callers: waiter id -> lease deadline (ms)
    <prefix>:{lk<b>}:ix:c        zset  the bucket's coordination index (:mod:`.coordindex`)

The latch is created with ``count`` by the first call that reaches Redis (a count-down, a
wait or a read); a later object built with another ``count`` sees the existing latch. Once
open it stays open (count 0) for ``ttl`` after its last change, then is forgotten. Each
:meth:`CountDownLatch.count_down` carries a request id recorded in the hash, so one resent
after a lost reply is counted once. At zero the count-down pushes the wake-up list, and
every waiter, blocked on it with ``BLMOVE list list`` (the element stays, see
:mod:`django_redislock.calls.wait`), wakes at once and reads the count.

A waiter's reads record it among the latch's waiters with a lease (its next block plus a
second), for the admin only: nothing waits on that record. A wait that returns removes it
(one ``ZREM``); a cancelled asyncio wait removes it in a task of its own that the
cancellation does not cut, and a waiter whose process died lapses at its lease.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

from ..calls.requests import request_id
from ..calls.wait import wait_on, wait_on_async
from ..exceptions import ConnectionFailed
from ..validation import check_count, check_name, check_seconds
from .calls import ABANDON_SECONDS, clean_up
from .keys import bucket_keys, lock_key
from .owners import new_token

if TYPE_CHECKING:
    from ..backends.redis import RedisLockBackend

#: How long a latch is kept after its last change (seconds): a day.
LATCH_TTL = 86_400.0
#: Resends of a count-down whose reply a connection error lost.
COUNT_DOWN_RESENDS = 2
#: Fraction of ``SOCKET_TIMEOUT`` one blocking read may use.
BLOCK_FRACTION = 0.8
#: Pause after a wait that a connection error ended, before the count is read again.
WAIT_FAILED_PAUSE = 0.05
#: How long a waiter's record outlives its next block (ms): then it lapses (a dead waiter).
LEASE_MARGIN_MS = 1000

Call = tuple[str, list[str], list[Any]]


class CountDownLatch:
    """A count-down latch shared by every process on one Redis (see the module docs)."""

    def __init__(
        self, backend: RedisLockBackend, name: str, *, count: int, ttl: float = LATCH_TTL
    ) -> None:
        self.backend = backend
        self.name = check_name(name)
        self.initial = check_count(count, "count", allow_zero=True)
        self.ttl = check_seconds(ttl, "ttl", allow_zero=False)
        self._key = lock_key(backend, self.name, "ln")
        self._signal_key = lock_key(backend, self.name, "ls")
        self._waiters_key = lock_key(backend, self.name, "lw")
        self._index_key = bucket_keys(backend, self.name).coord

    def __repr__(self) -> str:
        return f"<CountDownLatch {self.name!r} count={self.initial}>"

    def _ttl_ms(self) -> int:
        return max(1, int(self.ttl * 1000))

    def _count_down_call(self, rid: str) -> Call:
        keys = [self._key, self._signal_key, self._index_key]
        return "latch_count_down", keys, [self.initial, rid, self._ttl_ms()]

    def _read_call(self, waiter: str = "", lease_ms: int = 0) -> Call:
        keys = [self._key, self._waiters_key, self._index_key]
        return "latch_read", keys, [self.initial, self._ttl_ms(), waiter, lease_ms]

    def _run(self, call: Call) -> Any:
        script, keys, args = call
        with self.backend.errors():
            return self.backend.script(script)(keys=keys, args=args)

    async def _arun(self, call: Call) -> Any:
        script, keys, args = call
        client = self.backend.async_client()
        with self.backend.errors():
            return await self.backend.script(script, client)(keys=keys, args=args)

    # -- counting down -----------------------------------------------------------------------

    def count_down(self) -> int:
        """Count down by one (not below 0) and return the count left (0: open).

        Resent after a lost reply with the same request id, so it is counted once; if
        Redis stays unreachable, :class:`ConnectionFailed` is raised and the count-down
        may or may not have been applied (a call made again later is a new count-down).
        """
        call = self._count_down_call(request_id())
        for _ in range(COUNT_DOWN_RESENDS):
            try:
                return int(self._run(call)[1])
            except ConnectionFailed:
                continue
        return int(self._run(call)[1])

    async def count_down_async(self) -> int:
        """The asyncio twin of :meth:`count_down`."""
        call = self._count_down_call(request_id())
        for _ in range(COUNT_DOWN_RESENDS):
            try:
                return int((await self._arun(call))[1])
            except ConnectionFailed:
                continue
        return int((await self._arun(call))[1])

    # -- reading and waiting -----------------------------------------------------------------

    def count(self) -> int:
        """The count left (0: open); creates the latch with ``count`` if it does not exist."""
        return int(self._run(self._read_call()))

    async def count_async(self) -> int:
        """The asyncio twin of :meth:`count`."""
        return int(await self._arun(self._read_call()))

    def _lease_ms(self, deadline: float | None) -> int:
        block = self._block(deadline)
        return int((block or 0) * 1000) + LEASE_MARGIN_MS

    def _leave(self, waiter: str) -> None:
        """Remove this wait's record (best effort: it lapses at its lease otherwise)."""
        try:
            with self.backend.errors():
                self.backend.client.zrem(self._waiters_key, waiter)
        except ConnectionFailed:
            pass

    async def _leave_async(self, waiter: str) -> None:
        """The asyncio twin of :meth:`_leave`: a clean-up task a cancellation cannot cut.

        The caller waits for it at most ``ABANDON_SECONDS`` (:func:`~.calls.clean_up`); the
        removal itself runs until Redis answers or the client's own timeouts give up.
        """

        async def leave() -> None:
            try:
                with self.backend.errors():
                    await self.backend.async_client().zrem(self._waiters_key, waiter)
            except ConnectionFailed:
                pass

        wait = min(ABANDON_SECONDS, float(self.backend.options["SOCKET_TIMEOUT"]))
        await clean_up(leave(), wait)

    def delete(self) -> None:
        """Forget the latch now (its count and its wake-up). A later call creates it again
        with ``count``, and a waiter still waiting then waits on that new latch."""
        with self.backend.errors():
            self.backend.client.delete(self._key, self._signal_key, self._waiters_key)
            self.backend.client.zrem(self._index_key, self._key)

    async def delete_async(self) -> None:
        """The asyncio twin of :meth:`delete`."""
        client = self.backend.async_client()
        with self.backend.errors():
            await client.delete(self._key, self._signal_key, self._waiters_key)
            await client.zrem(self._index_key, self._key)

    def _block(self, deadline: float | None) -> float | None:
        """Seconds the next block may last, or None when the caller's wait is over."""
        longest = float(self.backend.options["SOCKET_TIMEOUT"]) * BLOCK_FRACTION
        if deadline is None:
            return longest
        left = deadline - time.monotonic()
        return None if left <= 0 else max(0.001, min(left, longest))

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the latch is open (True) or ``timeout`` seconds pass (False).

        ``timeout=None`` waits for ever. A wait is woken by the count-down that opens the
        latch, within a round trip; it reads the count again after every wake-up.
        """
        deadline = _deadline(timeout)
        waiter = new_token()
        try:
            while True:
                lease = self._lease_ms(deadline)
                if int(self._run(self._read_call(waiter, lease))) == 0:
                    return True  # the read that saw it open removed the record
                seconds = self._block(deadline)
                if seconds is None:
                    self._leave(waiter)
                    return False
                try:
                    wait_on(self.backend, (self._signal_key,), seconds, keep=True)
                except ConnectionFailed:  # the next read raises if Redis is still away
                    time.sleep(min(WAIT_FAILED_PAUSE, seconds))
        except BaseException:
            self._leave(waiter)
            raise

    async def wait_async(self, timeout: float | None = None) -> bool:
        """The asyncio twin of :meth:`wait`; cancelled, it leaves nothing behind in Redis."""
        deadline = _deadline(timeout)
        waiter = new_token()
        try:
            while True:
                lease = self._lease_ms(deadline)
                if int(await self._arun(self._read_call(waiter, lease))) == 0:
                    return True
                seconds = self._block(deadline)
                if seconds is None:
                    await self._leave_async(waiter)
                    return False
                try:
                    await wait_on_async(self.backend, (self._signal_key,), seconds, keep=True)
                except ConnectionFailed:
                    await asyncio.sleep(min(WAIT_FAILED_PAUSE, seconds))
        except BaseException:
            await self._leave_async(waiter)
            raise


def _deadline(timeout: float | None) -> float | None:
    if timeout is None:
        return None
    return time.monotonic() + check_seconds(timeout, "timeout", allow_zero=True)


__all__ = ["CountDownLatch"]
