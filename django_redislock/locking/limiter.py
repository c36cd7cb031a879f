"""``RateLimiter``: at most N units per period across every process, per key (GCRA on Redis).

``locks["default"].rate_limiter("payments", "20/s")`` admits at most 20 calls a second
across all processes and hosts, with a burst of a tenth of a second's worth (at least one)
unless ``burst=`` says otherwise; ``key=`` gives each tenant, user or customer its own
limit under the same name. The limit's whole state is one number in Redis (the generic
cell rate algorithm's theoretical arrival time, on the server's clock), written by one
script per take (``rate_take.lua``), the same algorithm as ``@task(rate_limit=...)``
(``fragments/gcra.lua``). Keys::

    <prefix>:{rl:<name>:<key>}:tat          string  the limit's state (expires when idle)
    <prefix>:{rl:<name>:<key>}:req:<id>     string  an admitted take, for a resend (60 s)

:meth:`RateLimiter.try_acquire` takes units now or not at all; a refusal changes nothing
and says how long until the units would be admitted. :meth:`RateLimiter.acquire` reserves
the first slot within its timeout in the same call and sleeps until it: one round trip
however long the wait, no polling, and the rate holds however late a sleeper wakes (a slot
is the server's, not the moment a client comes back to ask). A caller cancelled while it
sleeps leaves its slot unused: a limit is never exceeded, at worst under-used. Every take
carries a request id: a client that resends it after a lost reply is answered the same
admission and charged once.

A blocking take is a prepared ``EVALSHA`` (:meth:`RateLimiter._prepared`), sent like a lock
call: its head with the limit's state key is packed once per limit key and client, the
request key leads each call's arguments, and a plain client skips redis-py's
``execute_command`` (:mod:`django_redislock.calls.direct`). The asyncio twins use the
generic script call: there is no asyncio direct sender.

Refusals are answered locally when they can be (``local_refusals=True``, the default):
every answer tells a lower bound of the limit's state, which only a reset moves back, so
a take that the bound says must wait is one Redis would refuse too, and this process
answers it without a call (:mod:`django_redislock.locking.known`). Admissions always ask
Redis, so no process ever admits more than the limit; a local refusal's ``retry_after``
is at most the server's (the server also counts other processes' admissions since).
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import TYPE_CHECKING, Any, NamedTuple

from ..calls.requests import request_id
from ..calls.values import Arg
from ..connections import ROUTED_ERRORS
from ..exceptions import InvalidArgument
from ..validation import MAX_SECONDS, check_count, check_name, check_seconds, parse_rate
from .known import known_limits
from .names import safe_name
from .transport import client_calls

if TYPE_CHECKING:
    from ..backends.redis import RedisLockBackend
    from ..calls.script import Prepared

#: How long an admitted take's record is kept for a resend (ms): longer than any retry.
REQUEST_TTL_MS = 60_000


#: Longest wait a take may reserve a slot for (seconds): a day.
MAX_WAIT = 86_400.0

#: Most keys one limiter keeps a prepared take of (the oldest goes first): see ``_prepared``.
MAX_HEADS = 1024

#: The types of a ``wait`` the fast check in ``_checked`` takes as they are.
_NUMBERS = (int, float)

#: One key's prepared take and the start of its request keys (``...:req:``).
_Head = tuple["Prepared", str]


class Admission(NamedTuple):
    """What one take answered: admitted (now, or at a reserved slot), or refused."""

    admitted: bool
    #: refused: seconds until the cost would be admitted; admitted: seconds until the
    #: reserved slot begins (0.0: now)
    retry_after: float


class RateLimiter:
    """A rate limit shared by every process on one Redis (see the module docs)."""

    def __init__(
        self,
        backend: RedisLockBackend,
        name: str,
        rate: str,
        *,
        burst: int | None = None,
        local_refusals: bool = True,
    ) -> None:
        self.backend = backend
        self.name = check_name(name)
        self.rate = parse_rate(rate, "rate")
        if burst is None:
            burst = self.rate.burst
        self.burst = check_count(burst, "burst", allow_zero=False)
        self.interval = self.rate.interval
        #: refusals this process can tell without Redis are answered locally (module docs)
        self.local_refusals = bool(local_refusals)
        self._seconds = self.interval / 1_000_000
        self._known = known_limits(backend)
        #: str(key) (None: no key) -> its prepared take on the current client (``_prepared``)
        self._heads: dict[str | None, _Head] = {}
        self._grow = threading.Lock()

    def __repr__(self) -> str:
        return f"<RateLimiter {self.name!r} {self.rate.text} burst={self.burst}>"

    def _checked(self, cost: int, wait: float) -> tuple[int, float]:
        # the common case in a few comparisons (a take's own cost in µs); anything else, bad
        # input included, is judged by the checks below (a bool is neither int nor float)
        if (
            type(cost) is int
            and 0 < cost <= self.burst
            and type(wait) in _NUMBERS
            and 0 <= wait <= MAX_SECONDS
        ):
            return cost, float(wait)
        cost = check_count(cost, "cost", allow_zero=False)
        wait = check_seconds(wait, "wait", allow_zero=True)
        if cost > self.burst:
            raise InvalidArgument(
                f"cost must be at most the burst ({self.burst}): a take of {cost} units "
                "would never be admitted"
            )
        return cost, wait

    def _tag(self, key: Any) -> str:
        return f"rl:{self.name}" if key is None else f"rl:{self.name}:{safe_name(str(key), 'key')}"

    def _call(self, cost: int, key: Any, wait: float = 0.0) -> tuple[str, list[str], list[Any]]:
        return self._script_call(*self._checked(cost, wait), key)

    def _script_call(self, cost: int, wait: float, key: Any) -> tuple[str, list[str], list[Any]]:
        tag = self._tag(key)
        keys = [self.backend.key(tag, "tat"), self.backend.key(tag, "req", request_id())]
        longest = round(min(wait, MAX_WAIT) * 1_000_000)
        return "rate_take", keys, [self.interval, self.burst, cost, REQUEST_TTL_MS, longest]

    def _prepared(self, key: str | None) -> _Head:
        """The prepared take of limit ``key`` on the blocking client, and its request keys' start.

        A take's keys are the limit's state (fixed) and a fresh request key (per call), so
        the ``EVALSHA`` head carries the first and each call leads its arguments with the
        second (``extra_keys=1``); both share the limit's hash tag, so a Cluster routes the
        call by either to the same slot. Through a
        :class:`~django_redislock.calls.direct.DirectSender` where the client allows one,
        like the lock calls (:mod:`.transport`); ``NOSCRIPT`` is handled by
        :class:`~django_redislock.calls.script.Prepared`.
        """
        backend = self.backend
        client = backend.client
        entry = self._heads.get(key)
        if entry is not None and entry[0].client is client:
            return entry
        tag = self._tag(key)
        direct = bool(backend.options.get("DIRECT_SENDER", True))
        calls = client_calls(backend, client)
        prepared = calls.get(client, "rate_take", [backend.key(tag, "tat")], direct, 1)
        entry = (prepared, backend.key(tag, "req") + ":")
        with self._grow:  # eviction iterates the dict: no other thread may add meanwhile
            if key not in self._heads and len(self._heads) >= MAX_HEADS:
                del self._heads[next(iter(self._heads))]
            self._heads[key] = entry
        return entry

    def _which(self, key: Any) -> tuple[str, str | None]:
        """The limit's entry in this process's table (one per Redis key)."""
        return (self.name, None if key is None else str(key))

    def _known_refusal(self, cost: int, key: Any, wait: float) -> Admission | None:
        """The refusal Redis would answer, when this process knows it already (else None)."""
        if not self.local_refusals:
            return None
        now = time.monotonic()
        ahead = self._known.wait(self._which(key), now, self._seconds, self.burst, cost)
        return Admission(False, ahead) if ahead > wait else None

    def _admission(self, reply: Any, cost: int, key: Any, sent: float) -> Admission:
        """The server's answer, and what it tells of the limit's tat (see :mod:`.known`)."""
        admitted, micros = int(reply[0]), int(reply[1])
        wait = micros / 1_000_000
        if self.local_refusals:
            if not admitted:
                tat = sent + wait + (self.burst - cost) * self._seconds
            elif wait > 0:
                tat = sent + wait + self.burst * self._seconds
            else:
                tat = sent + cost * self._seconds
            self._known.learn(self._which(key), tat, sent)
        return Admission(bool(admitted), wait)

    def try_acquire(self, cost: int = 1, *, key: Any = None, wait: float = 0.0) -> Admission:
        """Take ``cost`` units now if the limit admits them (one round trip at most); never sleeps.

        With ``wait`` (seconds), a slot at most that far away is reserved instead: the
        answer is admitted with ``retry_after`` = when the slot begins, which the caller
        must wait for (what :meth:`acquire` does). A refusal that an earlier answer already
        implies is answered without Redis (see the module docs).
        """
        cost, wait = self._checked(cost, wait)
        known = self._known_refusal(cost, key, wait)
        if known is not None:
            return known
        prepared, requests = self._prepared(None if key is None else str(key))
        longest = round(min(wait, MAX_WAIT) * 1_000_000)
        # KEYS[2] (the request key) leads ARGV: see _prepared; one id per take, never per send
        args: list[Arg] = [
            requests + request_id(),
            self.interval,
            self.burst,
            cost,
            REQUEST_TTL_MS,
            longest,
        ]
        sent = time.monotonic()
        try:  # a plain try, not backend.errors(): the hot path (as the queue's calls)
            reply = prepared(args)
        except ROUTED_ERRORS:  # node errors, error replies: errors() sorts them
            with self.backend.errors():
                raise
        return self._admission(reply, cost, key, sent)

    async def try_acquire_async(
        self, cost: int = 1, *, key: Any = None, wait: float = 0.0
    ) -> Admission:
        """The asyncio twin of :meth:`try_acquire` (through the generic script call)."""
        cost, wait = self._checked(cost, wait)
        known = self._known_refusal(cost, key, wait)
        if known is not None:
            return known
        script, keys, args = self._script_call(cost, wait, key)
        client = self.backend.async_client()
        sent = time.monotonic()
        with self.backend.errors():
            reply = await self.backend.script(script, client)(keys=keys, args=args)
        return self._admission(reply, cost, key, sent)

    def acquire(self, cost: int = 1, *, key: Any = None, timeout: float | None = None) -> bool:
        """Take ``cost`` units at the first slot within ``timeout`` seconds and wait for it.

        True once the units are admitted; False at once when the first slot is further away
        than ``timeout`` (nothing is charged then). ``timeout=None`` accepts any wait;
        ``0`` is :meth:`try_acquire`. One round trip: the slot is reserved by the call
        (none when this process already knows the slot is too far).
        """
        answer = self.try_acquire(cost, key=key, wait=self._longest(timeout))
        if answer.admitted and answer.retry_after > 0:
            time.sleep(answer.retry_after)
        return answer.admitted

    async def acquire_async(
        self, cost: int = 1, *, key: Any = None, timeout: float | None = None
    ) -> bool:
        """The asyncio twin of :meth:`acquire` (cancelled while it waits, its slot goes unused)."""
        answer = await self.try_acquire_async(cost, key=key, wait=self._longest(timeout))
        if answer.admitted and answer.retry_after > 0:
            await asyncio.sleep(answer.retry_after)
        return answer.admitted

    def reset(self, key: Any = None) -> None:
        """Forget the limit's state: its full burst is admitted again at once.

        This process forgets what it knew of the limit at once; other processes trust what
        they learned for at most :data:`~django_redislock.locking.known.HORIZON` seconds
        (until then they may still refuse locally: a limit is never exceeded, at worst
        under-used).
        """
        tat = self.backend.key(self._tag(key), "tat")
        with self.backend.errors():
            self.backend.client.delete(tat)
        self._known.forget(self._which(key))

    async def reset_async(self, key: Any = None) -> None:
        """The asyncio twin of :meth:`reset`."""
        tat = self.backend.key(self._tag(key), "tat")
        with self.backend.errors():
            await self.backend.async_client().delete(tat)
        self._known.forget(self._which(key))

    @staticmethod
    def _longest(timeout: float | None) -> float:
        if timeout is None:
            return MAX_WAIT
        return check_seconds(timeout, "timeout", allow_zero=True)


__all__ = ["Admission", "RateLimiter"]
