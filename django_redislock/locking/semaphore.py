"""``Semaphore``: at most N holders across every process, each permit its own lease and fence.

``locks["default"].semaphore("exports:tenant-7", permits=5)`` admits five holders at once.
Each :meth:`Semaphore.acquire` returns a :class:`Permit` (or None when none was free for the
whole wait): its own id, TTL and fence (from the bucket's fence counter, the mutex's
scheme), released on its own, renewed by the watchdog when no ``ttl`` was given. The
permits are one sorted set of ``<owner>@<fence>`` scored by each permit's deadline on the
server's clock, so a holder that dies loses only its permit, at its deadline, and the next
acquire reclaims it. Keys (in the lock bucket's slot, see :mod:`.keys`)::

    <prefix>:{lk<b>}:sp:<name>   zset   permits: <owner>@<fence> -> deadline (ms)
    <prefix>:{lk<b>}:sq:<name>   zset   waiting callers: owner -> arrival number
    <prefix>:{lk<b>}:sd:<name>   zset   waiting callers: owner -> lease deadline (ms)
    <prefix>:{lk<b>}:ss:<name>   list   wake-up signal (short-lived)
    <prefix>:{lk<b>}:ix:c        zset   the bucket's coordination index: sp:<name> -> latest
                                        deadline while in use (see :mod:`.coordindex`)

The limit is the caller's (``permits``, which :attr:`Semaphore.permits` can change at run
time): a grant needs fewer permits held than the caller's limit, so lowering it takes no
permit away; new acquires wait until enough are released.

Waiters are granted in arrival order: a caller that has to wait is queued, and a permit
goes to a caller only when fewer than the free permits' number of live waiters are queued
ahead of it; a caller not yet queued (a non-blocking try included) never overtakes one.
A release wakes the queued callers (up to ``WAKE_CAP``) through the signal list; a waiter
also tries again every ``WAIT_BLOCK`` seconds at most, which renews its place (its lease),
so a waiter that dies holds up the queue for at most ``WAIT_BLOCK`` + ``LEASE_MARGIN_MS``.

The wait loop, resends, take-backs after a lost reply or a cancellation, the watchdog and
the lock signals are the locks' own (:class:`~.base.BaseLock`): a :class:`Permit` is a lock
object whose hold is one permit.
"""

from __future__ import annotations

import weakref
from contextvars import ContextVar
from typing import Any

from ..calls.node import Backend
from ..exceptions import InvalidArgument, LockNotAcquired, LockNotOwned
from ..validation import check_int
from .base import SIGNAL_MS, BaseLock
from .keys import bucket_keys, check_name, lock_key, to_ms
from .owners import Hold, new_token
from .transport import ScriptCalls

#: Most permits a semaphore may have.
MAX_PERMITS = 1_000_000
#: Longest a waiter blocks before it tries again, which renews its place in the queue (s).
WAIT_BLOCK = 0.5
#: How long a waiter's place outlives its next wait (ms): a waiter that died is passed over
#: this long after its last try's wait would have ended.
LEASE_MARGIN_MS = 1000
#: Most waiters a release wakes (the first ones in line; the others try again within
#: ``WAIT_BLOCK``).
WAKE_CAP = 64

#: The semaphores entered by ``with semaphore:`` in this thread or task, innermost last.
_entered: ContextVar[tuple[tuple[Semaphore, Permit], ...]] = ContextVar(
    "redislock_semaphores", default=()
)


#: Most semaphore names whose keys one backend keeps (then it starts over).
MAX_SPECS = 1024
_specs: weakref.WeakKeyDictionary[Any, dict[str, tuple[list[str], ScriptCalls]]] = (
    weakref.WeakKeyDictionary()
)


def _spec(backend: Backend, name: str) -> tuple[list[str], ScriptCalls]:
    """The keys (never changed after this) and prepared calls of semaphore ``name``, built once.

    ``with locks[alias].semaphore(name, 5):`` builds a semaphore per call, as the README's
    lock idiom does; as for the mutex (:func:`.mutex._spec`), its keys are worked out once.
    """
    known = _specs.get(backend)
    if known is None:
        known = _specs.setdefault(backend, {})
    found = known.get(name)
    if found is None:
        ix = bucket_keys(backend, name)
        keys = [lock_key(backend, name, part) for part in ("sp", "sq", "sd", "ss")]
        found = ([*keys, ix.fence, ix.released, ix.coord], ScriptCalls())
        if len(known) >= MAX_SPECS:
            known.clear()
        known[name] = found
    return found


class Permit(BaseLock):
    """One permit of a :class:`Semaphore`: a lock object whose hold is that permit.

    Build it with :meth:`Semaphore.permit` (not yet acquired) or get it acquired from
    :meth:`Semaphore.acquire`. ``release()``, ``extend()``, ``ensure_held()``, ``fence``
    and ``with``/``async with`` work as for a lock.
    """

    kind = "semaphore"

    def __init__(self, semaphore: Semaphore, **kwargs: Any) -> None:
        super().__init__(semaphore.backend, semaphore.name, **kwargs)
        self.semaphore = semaphore
        self._keys = semaphore.keys
        self._signal_key = semaphore.keys[3]
        self._scripts = semaphore.scripts
        self._queued = False
        self._id = ""

    def __repr__(self) -> str:
        state = f"id={self._hold.owner!r} fence={self._hold.fence}" if self._hold else "not held"
        return f"<Permit of {self.name!r} {state}>"

    @property
    def id(self) -> str:
        """This permit's id (``<owner>@<fence>``), also once released; raises
        :class:`LockNotOwned` if never held."""
        if not self._id:
            raise LockNotOwned(f"permit of {self.name!r} was never held", name=self.name)
        return self._id

    def _check_user(self, user: str, action: str) -> Hold | None:
        # A permit may be handed to another thread or task of the process and released
        # there (a worker pool finishing the job it admitted); only a forked child may not.
        hold = self._hold
        if hold is not None and hold.user.split(":")[:2] != user.split(":")[:2]:
            return super()._check_user(user, action)
        return hold

    def _owner_for_attempt(self, user: str) -> str:
        # unique to the acquire call: it names the request (a resend is recognised) and the
        # permit (nothing else can release it); an explicit owner only labels the permit
        token = new_token()
        return f"{self.owner}#{token}" if self.owner else token

    def _granted(self, owner: str, user: str, result: Any) -> bool:
        if int(result[0]) == 1:
            owner = self._id = f"{owner}@{int(result[1])}"  # its member (semaphore_acquire)
        return super()._granted(owner, user, result)

    def _max_block(self) -> float:
        return min(super()._max_block(), WAIT_BLOCK)

    def _start_acquire(
        self, blocking: bool | None, timeout: float | None
    ) -> tuple[bool, Any, str, str, float]:
        self._queued = False
        return super()._start_acquire(blocking, timeout)

    def meta(self, thread: str, task: str | None) -> str:
        return ""  # permits keep no holder metadata (the admin lists their ids and deadlines)

    def _attempt(
        self, owner: str, meta: str, blocking: bool, remaining: float, waited: bool = False
    ) -> tuple[str, list[str], list[Any]]:
        lease = 0
        if blocking and remaining > 0:
            lease = to_ms(min(remaining, self._max_block())) + LEASE_MARGIN_MS
            self._queued = True
        args = [owner, to_ms(self.ttl), self.semaphore.permits, lease, SIGNAL_MS, WAKE_CAP]
        return "semaphore_acquire", self._keys, args

    def _release_call(self, hold: Hold) -> tuple[str, list[str], list[Any]]:
        return "semaphore_release", self._keys, ["r", hold.owner, hold.fence, SIGNAL_MS, WAKE_CAP]

    def _abandon_call(self, owner: str) -> tuple[str, list[str], list[Any]]:
        return "semaphore_release", self._keys, ["t", owner, "", SIGNAL_MS, WAKE_CAP]

    def _stop_waiting_call(self, owner: str) -> tuple[str, list[str], list[Any]] | None:
        if not self._queued:
            return None
        self._queued = False
        return "semaphore_release", self._keys, ["l", owner, "", SIGNAL_MS, WAKE_CAP]

    def _extend_call(self, hold: Hold, ttl_ms: int) -> tuple[str, list[str], list[Any]]:
        return "semaphore_extend", [self._keys[0], self._keys[6]], [hold.owner, ttl_ms]

    def _not_acquired(self) -> LockNotAcquired:
        return LockNotAcquired(
            f"semaphore {self.name!r} had no free permit for the whole wait ({self.timeout:g} s)",
            name=self.name,
        )

    def locked(self) -> bool:
        """True when no permit is free for this semaphore's limit (two round trips)."""
        return self.semaphore.held() >= self.semaphore.permits

    async def locked_async(self) -> bool:
        """The asyncio twin of :meth:`locked`."""
        return await self.semaphore.held_async() >= self.semaphore.permits

    def holder_pttl(self) -> int:
        """Ms until the first permit held ends (0: none held): a 423's ``Retry-After``."""
        return self.semaphore.first_deadline_ms()

    async def holder_pttl_async(self) -> int:
        """The asyncio twin of :meth:`holder_pttl`."""
        return await self.semaphore.first_deadline_ms_async()


class Semaphore:
    """N permits shared by every process on one Redis; see the module docs.

    ``ttl``, ``timeout``, ``blocking``, ``watchdog``, ``on_lost`` and ``owner`` are the
    defaults of its permits, as for :meth:`~django_redislock.backends.redis.RedisLockBackend.lock`.
    """

    def __init__(self, backend: Backend, name: str, permits: int = 5, **defaults: Any) -> None:
        self.backend = backend
        self.name = check_name(name)
        self.permits = permits
        unknown = set(defaults) - {"ttl", "timeout", "blocking", "watchdog", "on_lost", "owner"}
        if unknown:
            raise InvalidArgument(f"semaphore() got unknown argument(s) {sorted(unknown)}")
        self.defaults = defaults
        self.keys, self.scripts = _spec(backend, self.name)
        Permit(self, **defaults)  # validate the defaults where they were written

    def __repr__(self) -> str:
        return f"<Semaphore {self.name!r} permits={self.permits}>"

    @property
    def permits(self) -> int:
        """The limit this object's acquires ask for; set it to change it at run time.

        Permits already held stay held when it goes down; acquires wait until fewer than
        the new limit are held. Each caller's own limit decides its acquires, so processes
        that disagree never hold more than the highest limit among them.
        """
        return self._permits

    @permits.setter
    def permits(self, value: int) -> None:
        self._permits = check_int(value, "permits", 0, MAX_PERMITS)

    def permit(self, **kwargs: Any) -> Permit:
        """A new permit object (not yet acquired); ``kwargs`` override the defaults."""
        return Permit(self, **{**self.defaults, **kwargs})

    def acquire(self, blocking: bool | None = None, timeout: float | None = None) -> Permit | None:
        """Take a permit, waiting up to ``timeout`` seconds when ``blocking``; None if none came.

        ``timeout=None`` is the default timeout (``OPTIONS['DEFAULT_TIMEOUT']``).
        """
        permit = self.permit()
        return permit if permit.acquire(blocking, timeout) else None

    async def acquire_async(
        self, blocking: bool | None = None, timeout: float | None = None
    ) -> Permit | None:
        """The asyncio twin of :meth:`acquire`; cancelled, it leaves no permit and no place."""
        permit = self.permit()
        return permit if await permit.acquire_async(blocking, timeout) else None

    def try_acquire(self) -> Permit | None:
        """A permit if one is free now and nobody is queued for it; never waits."""
        return self.acquire(blocking=False)

    # -- reading -----------------------------------------------------------------------------

    def _now_ms(self, reply: Any) -> int:
        return int(reply[0]) * 1000 + int(reply[1]) // 1000

    def held(self) -> int:
        """How many permits are held now (expired ones not counted; two round trips)."""
        with self.backend.errors():
            now = self._now_ms(self.backend.client.time())
            return int(self.backend.client.zcount(self.keys[0], f"({now}", "+inf"))

    async def held_async(self) -> int:
        """The asyncio twin of :meth:`held`."""
        client = self.backend.async_client()
        with self.backend.errors():
            now = self._now_ms(await client.time())
            return int(await client.zcount(self.keys[0], f"({now}", "+inf"))

    def waiting(self) -> int:
        """How many callers are queued for a permit (some may have lapsed a moment ago)."""
        with self.backend.errors():
            return int(self.backend.client.zcard(self.keys[1]))

    def first_deadline_ms(self) -> int:
        """Ms until the first permit held ends, by the server's clock (0: none held)."""
        with self.backend.errors():
            now = self._now_ms(self.backend.client.time())
            first = self.backend.client.zrangebyscore(
                self.keys[0], f"({now}", "+inf", start=0, num=1, withscores=True
            )
        return int(first[0][1]) - now if first else 0

    async def first_deadline_ms_async(self) -> int:
        """The asyncio twin of :meth:`first_deadline_ms`."""
        client = self.backend.async_client()
        with self.backend.errors():
            now = self._now_ms(await client.time())
            first = await client.zrangebyscore(
                self.keys[0], f"({now}", "+inf", start=0, num=1, withscores=True
            )
        return int(first[0][1]) - now if first else 0

    # -- ``with semaphore:`` -----------------------------------------------------------------

    def _entered(self, permit: Permit) -> Permit:
        _entered.set((*_entered.get(), (self, permit)))
        return permit

    def _leave(self) -> Permit:
        stack = list(_entered.get())
        for at in range(len(stack) - 1, -1, -1):
            if stack[at][0] is self:
                permit = stack.pop(at)[1]
                _entered.set(tuple(stack))
                return permit
        raise InvalidArgument(f"semaphore {self.name!r} was not entered in this thread or task")

    def __enter__(self) -> Permit:
        permit = self.permit()
        if not permit.acquire():
            raise permit._not_acquired()
        return self._entered(permit)

    def __exit__(self, *exc_info: object) -> None:
        self._leave().release()

    async def __aenter__(self) -> Permit:
        permit = self.permit()
        if not await permit.acquire_async():
            raise permit._not_acquired()
        return self._entered(permit)

    async def __aexit__(self, *exc_info: object) -> None:
        await self._leave().release_async()


__all__ = ["Permit", "Semaphore"]
