"""One Redlock mutex's calls on every master, and how their replies are counted by quorum.

:class:`QuorumMutex` holds what the lock asks of all masters at once: one
attempt (``lock_acquire`` everywhere, then ``redlock_fence`` where it was
granted), a release everywhere, an extension or check everywhere, and the
reads (is it held, for how long). Each turns the masters' replies into one
verdict by quorum (``N // 2 + 1``), trusting a grant only while its validity
(``ttl - elapsed - drift``) lasts. The waiting, the cancellation handling and
the public lock methods built on these are in :mod:`.lock`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, cast

from ..calls.node import Backend
from ..exceptions import ConnectionFailed, InvalidArgument
from ..locking.keys import to_ms
from ..locking.mutex import Lock
from ..locking.owners import Hold
from .masters import Master, Quorum

#: What a Redlock lock reads from its alias (the :class:`~.masters.Quorum` protocol's names).
QUORUM_ATTRIBUTES = (
    "alias",
    "options",
    "key_prefix",
    "key",
    "masters",
    "quorum",
    "each",
    "each_async",
)


@dataclass
class Outcome:
    """What one attempt on all masters found."""

    fence: int = 0
    valid_until: float = 0.0
    wait_ms: int = 0
    wait_on: Master | None = None
    reachable: int = 0


def as_lock_backend(redlock: Quorum) -> Backend:
    """``redlock`` as the single-node lock classes type their ``backend``.

    A :class:`QuorumMutex` reuses those classes' arguments, key names, call
    builders and hold state, which read only what every alias has from the
    backend (``alias``, ``options``, ``key()``). Every method that would reach one
    node through it (``client``, ``script``, ``errors``) is overridden to fan out
    to the masters, which the lock reaches through its ``redlock`` attribute,
    typed :class:`~.masters.Quorum`. The check makes any other object fail here,
    when the lock is built, rather than at its first call.
    """
    missing = [name for name in QUORUM_ATTRIBUTES if not hasattr(redlock, name)]
    if missing:
        raise TypeError(
            f"a Redlock lock needs a Redlock alias (masters and a quorum); "
            f"{type(redlock).__name__} has no {', '.join(missing)}"
        )
    return cast(Backend, redlock)


class QuorumMutex(Lock):
    """The calls of a mutex held on a quorum of independent masters (see the module docs)."""

    #: The Redlock alias: its masters, their quorum and the fan-out to them. ``backend``
    #: is the same object, as the single-node base classes see it (:func:`as_lock_backend`).
    redlock: Quorum

    def __init__(self, backend: Quorum, name: str, **kwargs: Any) -> None:
        if kwargs.pop("reentrant", False):
            raise InvalidArgument(
                "reentrant=True is not supported by the Redlock backend (supports_reentrant "
                "is False); use a Redis lock alias for reentrant locks"
            )
        self.redlock = backend
        super().__init__(as_lock_backend(backend), name, **kwargs)
        self.kind = "quorum"
        self._check_ttl(self.ttl, "ttl")
        self._valid_until = 0.0

    def _check_ttl(self, ttl: float, argument: str) -> None:
        limit = self.redlock.options["MAX_TTL"]
        if ttl > limit:
            raise InvalidArgument(
                f"{argument} {ttl:g}s is above OPTIONS['MAX_TTL'] ({limit:g}s) of "
                f"REDISLOCK_LOCKS[{self.redlock.alias!r}]; raise MAX_TTL or use the watchdog"
            )

    def _validity(self, started: float, ttl: float) -> float:
        """The monotonic time until which a hold taken at ``started`` is trusted."""
        drift = ttl * float(self.redlock.options["CLOCK_DRIFT_FACTOR"]) + 0.002
        return started + ttl - drift

    # -- one attempt ---------------------------------------------------------------------------

    def _try(self, owner: str, meta: str, mode: int, remaining: float = 1.0) -> Outcome:
        """One attempt on every master; a waiting one (``mode`` > 0) is recorded as a waiter
        on each master for the ``remaining`` seconds the caller will still wait."""
        redlock = self.redlock
        started = time.monotonic()
        call = self._attempt(owner, meta, mode != 0, remaining, mode == 2)
        replies = redlock.each(lambda master: master.run(call))
        outcome, granted, held, ours = self._tally(owner, replies)
        if self._in_time(granted, started):
            outcome.fence = max(granted)
            if self._fence_known(outcome, self._fence_everywhere(owner, outcome.fence)):
                outcome.valid_until = self._validity(started, self.ttl)
                if time.monotonic() < outcome.valid_until:
                    return outcome
            outcome.fence = 0
        if ours:
            self._release_everywhere(owner, ours)
        return self._waiting(outcome, held)

    def _tally(
        self, owner: str, replies: list[Any]
    ) -> tuple[Outcome, list[int], list[tuple[int, Master]], list[Master]]:
        """Count one attempt's replies: the outcome, granted fences, holds seen, our masters."""
        outcome = Outcome(reachable=sum(not isinstance(r, Exception) for r in replies))
        granted: list[int] = []
        held: list[tuple[int, Master]] = []
        # Where a failed attempt may have left a hold: masters that granted, and (for a fresh
        # token only) masters whose reply was lost. An explicit owner may legitimately hold
        # the lock from elsewhere, so its cleanup touches only what this attempt was granted.
        ours: list[Master] = []
        for master, reply in zip(self.redlock.masters, replies, strict=True):
            if isinstance(reply, Exception):
                if owner != self.owner:
                    ours.append(master)
                continue
            if int(reply[0]) == 1:
                ours.append(master)
                if master.counts():
                    granted.append(int(reply[1]))
            else:
                held.append((int(reply[1]), master))
        return outcome, granted, held, ours

    def _in_time(self, granted: list[int], started: float) -> bool:
        quorum = len(granted) >= self.redlock.quorum
        return quorum and time.monotonic() < self._validity(started, self.ttl)

    def _waiting(self, outcome: Outcome, held: list[tuple[int, Master]]) -> Outcome:
        """Note whom to wait for when a quorum holds the lock for someone else."""
        if len(held) >= self.redlock.quorum:
            held.sort(key=lambda pair: pair[0])
            outcome.wait_ms = held[-1][0]
            outcome.wait_on = next((m for _, m in held if m.counts()), held[-1][1])
        return outcome

    async def _try_async(self, owner: str, meta: str, mode: int, remaining: float = 1.0) -> Outcome:
        """The asyncio twin of :meth:`_try`: the masters are asked in parallel on the loop."""
        redlock = self.redlock
        started = time.monotonic()
        call = self._attempt(owner, meta, mode != 0, remaining, mode == 2)
        replies = await redlock.each_async(lambda master: master.run_async(call))
        outcome, granted, held, ours = self._tally(owner, replies)
        if self._in_time(granted, started):
            outcome.fence = max(granted)
            fenced = await self._fence_everywhere_async(owner, outcome.fence)
            if self._fence_known(outcome, fenced):
                outcome.valid_until = self._validity(started, self.ttl)
                if time.monotonic() < outcome.valid_until:
                    return outcome
            outcome.fence = 0
        if ours:
            await self._release_everywhere_async(owner, ours)
        return self._waiting(outcome, held)

    def _fence_call(self, owner: str, fence: int) -> Any:
        """The fence write, which also removes the caller's waiter entry on every master."""
        keys = [self._key, self._index.fence, self._waiters_key]
        return "redlock_fence", keys, [owner, fence, self._rid or owner]

    def _fence_everywhere(self, owner: str, fence: int) -> tuple[int, int]:
        call = self._fence_call(owner, fence)
        return self._fenced(self.redlock.each(lambda m: m.run(call)))

    async def _fence_everywhere_async(self, owner: str, fence: int) -> tuple[int, int]:
        call = self._fence_call(owner, fence)
        replies = await self.redlock.each_async(lambda m: m.run_async(call))
        return self._fenced(replies)

    def _fenced(self, replies: list[Any]) -> tuple[int, int]:
        """(masters that hold the grant with its fence and count, masters that answered)."""
        fenced = sum(
            1
            for master, reply in zip(self.redlock.masters, replies, strict=True)
            if not isinstance(reply, Exception) and int(reply) == 1 and master.counts()
        )
        return fenced, sum(not isinstance(reply, Exception) for reply in replies)

    def _fence_known(self, outcome: Outcome, fenced: tuple[int, int]) -> bool:
        """True when a quorum holds the grant with its fence.

        When too few masters answered the fence write to tell (its replies lost), the
        attempt's outcome is unknown rather than "held by another": ``reachable`` drops
        to those answers, so a call that ends there raises :class:`ConnectionFailed`
        instead of answering False for a lock that may be free (the caller releases what
        it took either way).
        """
        held, answered = fenced
        if held >= self.redlock.quorum:
            return True
        if answered < self.redlock.quorum:
            outcome.reachable = min(outcome.reachable, answered)
        return False

    def _release_everywhere(self, owner: str, only: list[Master] | None = None) -> tuple[int, int]:
        """Release ``owner``'s holds on all masters (or ``only``): (released, unreachable)."""
        call = self._release_args(owner, "*")
        return self._release_count(self.redlock.each(lambda master: master.run(call), only))

    async def _release_everywhere_async(
        self, owner: str, only: list[Master] | None = None
    ) -> tuple[int, int]:
        """The asyncio twin of :meth:`_release_everywhere`."""
        call = self._release_args(owner, "*")
        replies = await self.redlock.each_async(lambda master: master.run_async(call), only)
        return self._release_count(replies)

    @staticmethod
    def _release_count(replies: list[Any]) -> tuple[int, int]:
        """(released, unreachable) among one release's replies.

        Code 2 is a release that the master had already applied (the client resent
        it after a lost reply, with a ``retry`` in ``CLIENT_KWARGS``): released.
        """
        released = sum(1 for r in replies if not isinstance(r, Exception) and int(r[0]) in (1, 2))
        return released, sum(isinstance(r, Exception) for r in replies)

    # -- extend or check everywhere ------------------------------------------------------------

    def _extend_args(self, hold: Hold, ttl: float) -> Any:
        keys = [self._key, self._index.expiry]
        return "lock_extend", keys, [hold.owner, hold.fence, to_ms(ttl) if ttl else 0, self.name]

    def quorum_extend(self, hold: Hold, ttl: float) -> int | Exception:
        """Extend (``ttl`` > 0) or check (0) on every master.

        Returns the remaining milliseconds when a quorum holds (or, for a check,
        when not enough masters deny it while the validity lasts), ``-2`` when the
        hold is gone, or a :class:`ConnectionFailed` when neither can be told.
        """
        started = time.monotonic()
        call = self._extend_args(hold, ttl)
        return self._extended(started, ttl, self.redlock.each(lambda m: m.run(call)))

    async def quorum_extend_async(self, hold: Hold, ttl: float) -> int | Exception:
        """The asyncio twin of :meth:`quorum_extend`.

        Cancelled, it leaves the hold as it was or extended on some masters; the
        validity this object trusts is only moved by a completed extension.
        """
        started = time.monotonic()
        call = self._extend_args(hold, ttl)
        return self._extended(
            started, ttl, await self.redlock.each_async(lambda m: m.run_async(call))
        )

    def _extended(self, started: float, ttl: float, replies: list[Any]) -> int | Exception:
        quorum, total = self.redlock.quorum, len(self.redlock.masters)
        held = denied = 0
        for master, reply in zip(self.redlock.masters, replies, strict=True):
            if isinstance(reply, Exception):
                continue
            if int(reply) > 0 and master.counts():
                held += 1
            elif int(reply) <= 0:
                denied += 1
        if ttl and held >= quorum and time.monotonic() < self._validity(started, ttl):
            self._valid_until = self._validity(started, ttl)
        left = self._valid_until - time.monotonic()
        if left <= 0 or denied > total - quorum:
            return -2
        if held >= quorum or not ttl:
            return max(1, int(left * 1000))
        return ConnectionFailed(
            f"lock {self.name!r}: only {held} of {total} Redlock masters confirmed the extension"
        )

    # -- reads ---------------------------------------------------------------------------------

    def locked(self) -> bool:
        """True when a quorum of masters has the lock held."""
        replies = self.redlock.each(lambda master: master.client.exists(self._key))
        held = sum(1 for r in replies if not isinstance(r, Exception) and r)
        return bool(held >= self.redlock.quorum)

    async def locked_async(self) -> bool:
        """The asyncio twin of :meth:`locked`."""

        async def exists(master: Master) -> Any:
            with master.errors():
                return await master.async_client().exists(self._key)

        replies = await self.redlock.each_async(exists)
        held = sum(1 for r in replies if not isinstance(r, Exception) and r)
        return bool(held >= self.redlock.quorum)

    def _pttl_verdict(self, replies: list[Any]) -> int:
        """Milliseconds until fewer than a quorum of masters hold the lock (0: not held)."""
        left = sorted((int(r) for r in replies if not isinstance(r, Exception)), reverse=True)
        quorum = self.redlock.quorum
        return max(0, left[quorum - 1]) if len(left) >= quorum else 0

    def holder_pttl(self) -> int:
        """How long the current holder (whoever it is) keeps the lock, by quorum, in ms."""
        return self._pttl_verdict(self.redlock.each(lambda m: m.client.pttl(self._key)))

    async def holder_pttl_async(self) -> int:
        """The asyncio twin of :meth:`holder_pttl`."""

        async def pttl(master: Master) -> Any:
            with master.errors():
                return await master.async_client().pttl(self._key)

        return self._pttl_verdict(await self.redlock.each_async(pttl))
