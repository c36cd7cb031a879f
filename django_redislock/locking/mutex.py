"""The mutex and the reentrant lock (one hash per lock name, see :mod:`.keys`).

A mutex hold's owner is a fresh random token, so only the lock object that took
it can release it. A reentrant hold's owner is the calling thread or asyncio
task (or an explicit ``owner=`` string, e.g. a Celery task id), and the hash
counts how many times that owner took it, as Redisson's ``RLock`` does; the
fence stays the same across re-entries because they are one grant.
"""

from __future__ import annotations

import contextlib
import weakref
from typing import Any

from ..calls.node import Backend
from ..calls.requests import request_id
from ..exceptions import LockNotOwned
from .base import SIGNAL_MS, WAIT_RECORD_CAP, BaseLock
from .keys import BucketKeys, name_keys, to_ms
from .owners import Hold, new_token
from .transport import ScriptCalls

#: What lock objects of one name on one backend share: the lock key, the signal key, the
#: bucket's index keys, the waiters key, the keys of an acquire, of a waiting acquire and of
#: a release, and the prepared calls (:class:`~.transport.ScriptCalls`).
_Spec = tuple[str, str, BucketKeys, str, list[str], list[str], list[str], ScriptCalls]

#: Most lock names whose spec one backend keeps (then it starts over).
MAX_SPECS = 1024
#: The specs of a backend whose class refuses new attributes (others keep theirs, see _spec).
_specs: weakref.WeakKeyDictionary[Any, dict[str, _Spec]] = weakref.WeakKeyDictionary()


def _spec(backend: Backend, name: str) -> _Spec:
    """The keys and prepared calls of lock ``name`` on ``backend``, built once per name.

    ``with locks[alias].lock(name, ttl=10):`` builds a lock object per call; building
    its keys and preparing its calls again each time cost a quarter of the cycle. The
    key lists are never changed after this (a call that needs other keys builds its own).
    """
    try:  # an attribute of the backend: WeakKeyDictionary.get runs Python code per call
        known: dict[str, _Spec] = backend._lock_specs  # type: ignore[attr-defined]
    except AttributeError:
        known = _specs.setdefault(backend, {})
        with contextlib.suppress(AttributeError):
            backend._lock_specs = known  # type: ignore[attr-defined]
    found = known.get(name)
    if found is None:
        base, ix = name_keys(backend, name)
        key, signal_key, waiters_key = f"{base}:l:{name}", f"{base}:s:{name}", f"{base}:q:{name}"
        acquire_keys = [key, ix.fence, ix.names, ix.expiry, ix.released]
        wait_keys = [*acquire_keys, waiters_key]
        release_keys = [key, signal_key, ix.released, ix.expiry, ix.fence]
        calls = ScriptCalls()
        found = (key, signal_key, ix, waiters_key, acquire_keys, wait_keys, release_keys, calls)
        if len(known) >= MAX_SPECS:
            known.clear()
        known[name] = found
    return found


class Lock(BaseLock):
    """A distributed mutex, or with ``reentrant=True`` a reentrant lock.

    Build it with ``locks[alias].lock(name, ...)``; see :mod:`django_redislock.locking`.
    """

    _shared_scripts = True  # from the name's spec (see _spec)

    def __init__(
        self, backend: Backend, name: str, *, reentrant: bool = False, **kwargs: Any
    ) -> None:
        super().__init__(backend, name, **kwargs)
        self.reentrant = bool(reentrant)
        self.kind = "reentrant" if self.reentrant else "mutex"
        # shared by every lock object of this name on this backend: the keys each call
        # sends and the prepared calls that send them (see :func:`_spec`)
        (
            self._key,
            self._signal_key,
            self._index,
            self._waiters_key,
            self._acquire_keys,
            self._wait_keys,
            self._release_keys,
            self._scripts,
        ) = _spec(backend, self.name)
        # "t": the owner is a token drawn per acquire call, which names the call (resends)
        self._kind_code = "r" if self.reentrant else "m" if self.owner else "t"

    def _reentrant_object(self) -> bool:
        return self.reentrant

    def _level_id(self) -> str:
        return self._rid if self.reentrant else ""

    def _owner_for_attempt(self, user: str) -> str:
        if self.owner:
            return self.owner
        return user if self.reentrant else new_token()

    def _request_id(self) -> str:
        # A mutex's own token names its acquire; a reentrant or explicit owner is shared by
        # many acquires, so each call gets its own id (see lock_acquire.lua).
        return request_id() if self.reentrant or self.owner else ""

    def _attempt(
        self, owner: str, meta: str, blocking: bool, remaining: float, waited: bool = False
    ) -> tuple[str, list[str], list[Any]]:
        wait = "2" if waited else "1" if blocking and remaining > 0 else "0"
        args = [owner, to_ms(self.ttl), self.name, meta, self._kind_code + wait]
        if wait == "0":
            if self._rid:
                args.append(self._rid)
            return "lock_acquire", self._acquire_keys, args
        # a waiting try records the caller in the waiters zset for the admin's count
        args += [self._rid or "", to_ms(min(max(remaining, 0.0), WAIT_RECORD_CAP))]
        return "lock_acquire", self._wait_keys, args

    def _abandon_call(self, owner: str) -> tuple[str, list[str], list[Any]]:
        script, keys, args = self._release_args(owner, "*")
        return script, keys, [*args, self._rid or owner]

    def _release_call(self, hold: Hold) -> tuple[str, list[str], list[Any]]:
        script, keys, args = self._release_args(hold.owner, hold.fence)
        if hold.levels:  # the latest level of this object ends (lock_release.lua ARGV[7])
            return script, keys, [*args, "", hold.levels[-1]]
        return script, keys, args

    def _release_args(self, owner: str, fence: int | str) -> tuple[str, list[str], list[Any]]:
        # A mutex hold is released once, so its fence names the release; a reentrant hold
        # (or a release by owner alone) is released in steps, each needing its own id so
        # that a resent step is recognised (see lock_release.lua).
        rid = request_id() if self.reentrant or fence == "*" else ""
        args = [owner, fence, self.name, SIGNAL_MS, rid]
        return "lock_release", self._release_keys, args

    def _extend_call(self, hold: Hold, ttl_ms: int) -> tuple[str, list[str], list[Any]]:
        keys = [self._key, self._index.expiry]
        if ttl_ms and hold.levels:  # this object's levels get the new deadline, no other
            return "lock_extend", keys, [hold.owner, hold.fence, ttl_ms, self.name, *hold.levels]
        return "lock_extend", keys, [hold.owner, hold.fence, ttl_ms, self.name]

    def _foreign_release(self) -> tuple[str, list[str], list[Any]] | None:
        """For an explicit owner with no local hold: release whatever hold that owner has.

        Not for an object whose own hold is known lost (``ensure_held``/``extend`` raised
        :class:`LockLost`): the owner may hold the lock again since (its next run, a task
        redelivered under the same id), and that newer hold is not this object's to end.
        """
        if self._hold is None and self._lost_hold is None and self.owner is not None:
            return self._release_args(self.owner, "*")
        return None

    def release(self) -> None:
        call = self._foreign_release()
        if call is None:
            return super().release()
        self._foreign_released(self._call(call))

    async def release_async(self) -> None:
        call = self._foreign_release()
        if call is None:
            return await super().release_async()
        self._foreign_released(await self._acall(call))

    def _foreign_released(self, result: Any) -> None:
        if int(result[0]) != 1:
            raise LockNotOwned(
                f"owner {self.owner!r} does not hold lock {self.name!r}", name=self.name
            )

    def locked(self) -> bool:
        """True when anyone holds the lock (one round trip)."""
        with self.backend.errors():
            return bool(self.backend.client.exists(self._key))

    async def locked_async(self) -> bool:
        """The asyncio twin of :meth:`locked`."""
        with self.backend.errors():
            return bool(await self.backend.async_client().exists(self._key))

    @property
    def count(self) -> int:
        """How many times this object holds the lock (0 when it does not)."""
        hold = self._hold
        return hold.count if hold is not None else 0
