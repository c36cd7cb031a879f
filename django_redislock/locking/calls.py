"""How a lock object's script calls reach Redis, and what happens when a reply is lost.

:class:`LockCalls` is the part of :class:`~django_redislock.locking.base.BaseLock`
between the call a lock kind builds (``(script, keys, args)``: an acquire try, a
release, an extension, the take-back of a grant) and the server:

* :meth:`LockCalls._call` runs it on the blocking client (a grant script with
  ``OPTIONS['MIN_REPLICAS_ACK']`` goes with a ``WAIT``, see :mod:`.replicas`), and
  :meth:`LockCalls._acall` on the asyncio client; a connection error becomes
  :class:`~django_redislock.exceptions.ConnectionFailed`.
* Every lock script is safe to resend: one that already ran answers as it did the
  first time. A call whose reply was lost is resent (:meth:`LockCalls._resend`);
  an acquire try that stays unknown is taken back (:meth:`LockCalls._resolve`,
  :meth:`LockCalls._abandon`), so an unreachable Redis leaves at worst a grant that
  nothing renews and that ends by its TTL.
* A call that ends a hold (a release, a downgrade) goes through
  :meth:`LockCalls._send_end`: resent after a lost reply and, if its outcome stays
  unknown, given up by the object (nothing renews the hold, which ends by its TTL).
* After a cancellation cuts an asyncio call short, :meth:`LockCalls._finish_async`
  sends it once more as a task of its own (:func:`clean_up`): the cancellation goes on
  once that call is answered, or after ``ABANDON_SECONDS`` at most, while the call itself
  runs until Redis answers or the client's own timeouts give up. A further cancellation
  cannot cut it off either.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

from ..calls.script import Call
from ..calls.wait import Popped, cancels, raise_swallowed_cancel
from ..connections import ROUTED_ERRORS
from ..exceptions import ConnectionFailed
from .holding import HoldKeeping
from .owners import Hold
from .replicas import GRANT_SCRIPTS, call_with_ack, wants_ack
from .transport import ScriptCalls

logger = logging.getLogger("django_redislock.locks")

#: Resends of a call whose reply a connection error lost (an acquire try, a release, a downgrade).
RESOLVE_RESENDS = 2
#: Most seconds a cancelled asyncio call waits for its clean-up (a take-back, a release sent
#: once more) before the cancellation goes on; the clean-up itself is not cut at that point.
ABANDON_SECONDS = 1.0

#: Clean-ups after cancelled calls still running (strong references, so none is collected).
_CLEANUPS: set[asyncio.Future[None]] = set()


async def clean_up(work: Coroutine[Any, Any, None], wait: float) -> None:
    """Run ``work`` (the clean-up after a cancelled call) as a task; wait ``wait`` s at most.

    Only the caller's wait is bounded, so a cancellation is not held up for long by a
    slow or silent Redis. The clean-up is not: it runs until Redis answers or the client's
    own timeouts (``SOCKET_TIMEOUT``, ``SOCKET_CONNECT_TIMEOUT``) give up. Cut off at the
    caller's bound, it was cut off before its request went out whenever reconnecting took
    longer (the cancelled call's connection is closed; on a loaded machine the new one's
    handshake alone took over a second), and the grant it was to take back stayed for its
    whole TTL though Redis answered. A further cancellation of the caller ends its wait,
    never the task; a loop closed meanwhile (``asyncio.run`` cancels what is left) does
    end it, and what it was to remove then ends by its TTL.
    """
    task = asyncio.ensure_future(work)
    _CLEANUPS.add(task)
    task.add_done_callback(_CLEANUPS.discard)
    await asyncio.wait((task,), timeout=wait)  # on timeout or cancellation, ``task`` goes on


class LockCalls(HoldKeeping):
    """The script calls of a lock kind and how they are sent (see the module docstring).

    Subclasses build the calls: :meth:`_attempt` (one acquire try),
    :meth:`_release_call`, :meth:`_extend_call`, :meth:`_abandon_call`, and name
    :attr:`_signal_key`, the list a release pushes to wake a waiter.
    """

    _scripts: ScriptCalls

    # -- what subclasses build ---------------------------------------------------------------

    def _attempt(
        self, owner: str, meta: str, blocking: bool, remaining: float, waited: bool = False
    ) -> Call:
        """One acquire try; ``waited``: this call already waited for a wake-up."""
        raise NotImplementedError

    def _release_call(self, hold: Hold) -> Call:
        raise NotImplementedError

    def _extend_call(self, hold: Hold, ttl_ms: int) -> Call:
        raise NotImplementedError

    def _abandon_call(self, owner: str) -> Call:
        """The call that takes back this acquire's possible grant (see ``_rid``)."""
        raise NotImplementedError

    _signal_key: str = ""
    #: What the last wait for a wake-up popped (None: it ended without one).
    _woken: Popped | None = None
    #: The request id of the acquire call in progress ("" when its owner is unique to it).
    _rid: str = ""

    def _stop_waiting_call(self, owner: str) -> Call | None:
        """The call that withdraws what a waiting acquire left besides a grant, if anything.

        A waiting writer's intent refuses new readers: a writer that stops waiting
        (timed out, cancelled) takes it away at once rather than leaving it to expire.
        """
        return None

    def _request_id(self) -> str:
        """A request id for one acquire call, or "" when the owner token already is one."""
        return ""

    # -- sending -----------------------------------------------------------------------------

    def _call(self, call: Call) -> Any:
        # wants_ack(), inline: the test runs twice per lock cycle
        if call[0] in GRANT_SCRIPTS and self.backend.options.get("MIN_REPLICAS_ACK"):
            return call_with_ack(self, call)  # OPTIONS['MIN_REPLICAS_ACK']: grant + WAIT
        return self._call_plain(call)

    def _call_plain(self, call: Call) -> Any:
        script, keys, args = call
        try:  # no context manager on the hot path: it costs more than the call's own Python
            return self._scripts.run(self.backend, script, keys, args)
        except ROUTED_ERRORS:  # node errors, error replies: errors() sorts them
            with self.backend.errors():
                raise

    async def _acall(self, call: Call) -> Any:
        # a cancellation redis-py lost while the reply was awaited is raised here, so that
        # the acquire loop takes back what the call may have granted (see calls/wait.py)
        task = asyncio.current_task()
        before = cancels(task)
        try:
            script, keys, args = call
            if wants_ack(self.backend, script):
                return await asyncio.to_thread(call_with_ack, self, call)
            client = self.backend.async_client()
            with self.backend.errors():
                return await self.backend.script(script, client)(keys=keys, args=args)
        finally:
            raise_swallowed_cancel(task, before)

    def _resend(self, call: Call) -> Any:
        """Resend a resend-safe call whose reply was lost; the last error wins."""
        for _ in range(RESOLVE_RESENDS - 1):
            try:
                return self._call(call)
            except ConnectionFailed:
                continue
        return self._call(call)

    async def _resend_async(self, call: Call) -> Any:
        """The asyncio twin of :meth:`_resend`."""
        for _ in range(RESOLVE_RESENDS - 1):
            try:
                return await self._acall(call)
            except ConnectionFailed:
                continue
        return await self._acall(call)

    def _send_end(self, hold: Hold, call: Call) -> Any:
        """Send ``call``, which ends ``hold`` (a release, a downgrade); resent after a lost reply.

        If its outcome stays unknown (Redis unreachable, an interrupt), the object gives
        the hold up (:meth:`~.holding.HoldKeeping._release_failed`: nothing renews it, it
        ends by its TTL at worst) and the error goes on.
        """
        try:
            try:
                return self._call(call)
            except ConnectionFailed:
                return self._resend(call)
        except BaseException:
            self._release_failed(hold)
            raise

    async def _send_end_async(self, hold: Hold, call: Call, cleanup: tuple[Call, ...] = ()) -> Any:
        """The asyncio twin of :meth:`_send_end`.

        Cancelled at its await, it sends ``call`` once more, then each ``cleanup`` call
        (in that order, each for at most ``ABANDON_SECONDS``, see :meth:`_finish_async`),
        before the cancellation goes on.
        """
        try:
            try:
                return await self._acall(call)
            except ConnectionFailed:
                return await self._resend_async(call)
        except BaseException as exc:  # includes a cancellation at the await
            self._release_failed(hold)
            if not isinstance(exc, ConnectionFailed):
                await self._finish_async(call, *cleanup)
            raise

    async def _finish_async(self, *calls: Call) -> None:
        """Send resend-safe calls once more, in order, after a cancellation cut them short.

        They run as their own task (:func:`clean_up`), which the caller waits for at most
        ``ABANDON_SECONDS`` (or ``SOCKET_TIMEOUT``, if shorter). A further cancellation
        (a second ``cancel()``, or anyio's cancel scope cancelling at every await) ends
        the caller's wait but not the calls, which finish in the background: a take-back
        cut off there would leave the grant for its whole TTL. Each call is bounded by
        the client's own timeouts, as any call is, so the background task is too.
        """
        wait = min(ABANDON_SECONDS, float(self.backend.options["SOCKET_TIMEOUT"]))
        await clean_up(self._send_each(calls), wait)

    async def _send_each(self, calls: tuple[Call, ...]) -> None:
        for call in calls:
            try:
                await self._acall(call)
            except Exception as exc:
                logger.warning(
                    "lock %r: a cancelled call could not be completed: %s", self.name, exc
                )

    # -- an acquire whose outcome is unknown -------------------------------------------------

    def _resolve(self, call: Call, owner: str, exc: Exception) -> Any:
        """Resend an attempt whose outcome is unknown; take it back if Redis stays away.

        The error raised then is ``exc``, the one that made the outcome unknown.
        """
        try:
            return self._resend(call)
        except ConnectionFailed:
            pass
        self._abandon(owner)
        raise exc

    async def _resolve_async(self, call: Call, owner: str, exc: Exception) -> Any:
        """The asyncio twin of :meth:`_resolve`; cancelled, it takes the attempt back too."""
        try:
            return await self._resend_async(call)
        except ConnectionFailed:
            pass
        except BaseException:  # a cancellation at the await
            await self._abandon_async(owner)
            raise
        await self._abandon_async(owner)
        raise exc

    def _abandon(self, owner: str) -> None:
        """Take back this acquire's possible grant: one best-effort call (and its wait's)."""
        try:
            self._call_plain(self._abandon_call(owner))
        except Exception as exc:
            logger.warning("lock %r: could not take back an unknown grant: %s", self.name, exc)
        self._stop_waiting(owner)

    async def _abandon_async(self, owner: str) -> None:
        leave = self._stop_waiting_call(owner)
        take_back = self._abandon_call(owner)
        await self._finish_async(*((take_back,) if leave is None else (take_back, leave)))

    def _stop_waiting(self, owner: str) -> None:
        """Send :meth:`_stop_waiting_call`, if any: one best-effort call."""
        call = self._stop_waiting_call(owner)
        if call is None:
            return
        try:
            self._call_plain(call)
        except Exception as exc:
            logger.warning("lock %r: could not withdraw a wait: %s", self.name, exc)

    async def _stop_waiting_async(self, owner: str) -> None:
        """The asyncio twin of :meth:`_stop_waiting`; a further cancellation cannot cut it."""
        call = self._stop_waiting_call(owner)
        if call is not None:
            await self._finish_async(call)
