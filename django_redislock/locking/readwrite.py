"""The read-write lock: many readers or one writer, with writer preference.

Every read hold is its own member ``<owner>@<fence>`` of a sorted set, scored
by its own deadline (see :mod:`.keys`), so one reader can never release or
renew another's hold, not even one of the same owner::

    rw:<name>  hash   o=writer owner, f=fence, m=metadata (PEXPIRE = writer's TTL)
    rr:<name>  zset   <reader owner>@<fence> -> deadline ms (PEXPIRE = latest deadline)
    rm:<name>  hash   the latest reader's m and f        (PEXPIRE = latest deadline)
    ri:<name>  string owner of the writer that waits     (PX = that writer's wait)

Policy: a writer that has to wait leaves an *intent* that refuses new readers,
so a stream of overlapping readers cannot starve it; readers already inside
finish normally. The intent lives only as long as the writer keeps waiting.
A writer can :meth:`WriteLock.downgrade` to a read hold atomically.
"""

from __future__ import annotations

from typing import Any, TypeVar

from ..calls.node import Backend
from ..exceptions import InvalidArgument
from .base import SIGNAL_MS, WAIT_RECORD_CAP, BaseLock
from .keys import bucket_keys, check_name, lock_key, to_ms
from .owners import Hold, current_user, new_token

_R = TypeVar("_R", bound="ReadLock")

#: Extra life of a waiting writer's intent beyond its next wait (ms).
INTENT_MARGIN_MS = 50
#: A waiting writer's wake-up period (seconds): it blocks at most this long before trying
#: again, which renews its intent. A writer that stops waiting withdraws its intent
#: (lock_rw_unwait.lua); one killed while waiting leaves it for at most this period plus
#: the margin, so readers are not kept out by a writer that is gone.
WRITER_BLOCK = 0.25


class _RWKeys:
    def __init__(self, backend: Backend, name: str) -> None:
        self.writer = lock_key(backend, name, "rw")
        self.readers = lock_key(backend, name, "rr")
        self.reader_meta = lock_key(backend, name, "rm")
        self.intent = lock_key(backend, name, "ri")
        self.read_signal = lock_key(backend, name, "sr")
        self.write_signal = lock_key(backend, name, "sw")
        #: callers waiting for the name (shared with its mutex; see lock_rw_write.lua)
        self.waiters = lock_key(backend, name, "q")
        self.index = bucket_keys(backend, name)


class _RWHold(BaseLock):
    """One side (read or write) of a read-write lock."""

    mode = "r"

    def __init__(self, parent: ReadWriteLock, **kwargs: Any) -> None:
        super().__init__(parent.backend, parent.name, **kwargs)
        self.parent = parent
        self._keys = parent.keys
        keys = parent.keys
        self._signal_key = keys.read_signal if self.mode == "r" else keys.write_signal

    def _owner_for_attempt(self, user: str) -> str:
        # Every read or write hold has an owner unique to its acquire call: that names the
        # request (a resend is recognised) and the hold (nothing else can release it). An
        # explicit owner only labels a hold (there is no release from elsewhere), so it gets
        # a unique suffix: two holds given the same owner stay two holds.
        token = new_token()
        return f"{self.owner}#{token}" if self.owner else token

    def _release_keys(self) -> list[str]:
        k = self._keys
        ix = k.index
        return [
            k.writer,
            k.readers,
            k.read_signal,
            k.write_signal,
            ix.released,
            ix.expiry,
            k.reader_meta,
        ]

    def _release_call(self, hold: Hold) -> tuple[str, list[str], list[Any]]:
        args = [self.mode, hold.owner, hold.fence, self.name, SIGNAL_MS]
        return "lock_rw_release", self._release_keys(), args

    def _abandon_call(self, owner: str) -> tuple[str, list[str], list[Any]]:
        args = [self.mode, owner, "*", self.name, SIGNAL_MS, "1"]
        return "lock_rw_release", self._release_keys(), args

    def _extend_call(self, hold: Hold, ttl_ms: int) -> tuple[str, list[str], list[Any]]:
        k = self._keys
        keys = [k.writer, k.readers, k.index.expiry, k.reader_meta]
        return "lock_rw_extend", keys, [self.mode, hold.owner, hold.fence, ttl_ms, self.name]

    def locked(self) -> bool:
        """True when anyone holds the read-write lock, reader or writer (one round trip)."""
        state = self.parent.state()
        return bool(state["writer"] or state["readers"])

    async def locked_async(self) -> bool:
        """The asyncio twin of :meth:`locked`."""
        state = await self.parent.state_async()
        return bool(state["writer"] or state["readers"])


class ReadLock(_RWHold):
    """A read hold: shared with other readers, excluded by a writer or a waiting writer."""

    kind = "read"
    mode = "r"
    #: True while this object holds a read hold a downgrade handed to it.
    _from_downgrade = False

    def _granted(self, owner: str, user: str, result: Any) -> bool:
        # The hold's member in the readers set carries its fence (see lock_rw_read.lua).
        if int(result[0]) == 1:
            owner = f"{owner}@{int(result[1])}"
        return super()._granted(owner, user, result)

    def __enter__(self: _R) -> _R:
        if self._take_downgraded():
            return self
        return super().__enter__()

    async def __aenter__(self: _R) -> _R:
        if self._take_downgraded():
            return self
        return await super().__aenter__()

    def _take_downgraded(self) -> bool:
        """``with writer.downgrade() as reader:`` enters the hold the downgrade gave."""
        if self._from_downgrade and self._hold is not None:
            self._from_downgrade = False
            return True
        return False

    def _attempt(
        self, owner: str, meta: str, blocking: bool, remaining: float, waited: bool = False
    ) -> tuple[str, list[str], list[Any]]:
        k = self._keys
        ix = k.index
        keys = [k.writer, k.readers, k.intent, k.read_signal, ix.fence, ix.names, ix.expiry]
        keys += [k.reader_meta, ix.released]
        args = [owner, to_ms(self.ttl), self.name, meta, SIGNAL_MS]
        if blocking and remaining > 0:  # a waiting try is counted on the admin's locks page
            keys.append(k.waiters)
            args.append(to_ms(min(remaining, WAIT_RECORD_CAP)))
        return "lock_rw_read", keys, args


class WriteLock(_RWHold):
    """The write hold: excludes readers and other writers."""

    kind = "write"
    mode = "w"

    def _attempt(
        self, owner: str, meta: str, blocking: bool, remaining: float, waited: bool = False
    ) -> tuple[str, list[str], list[Any]]:
        k = self._keys
        ix = k.index
        keys = [k.writer, k.readers, k.intent, ix.fence, ix.names, ix.expiry, k.write_signal]
        keys.append(ix.released)
        intent_ms = 0
        if blocking and remaining > 0:
            intent_ms = to_ms(min(remaining, self._max_block())) + INTENT_MARGIN_MS
            keys.append(k.waiters)  # a waiting try is counted on the admin's locks page
        woken = self._woken
        passed = "1" if waited and woken is not None and woken[1] == b"1" else "0"
        args = [owner, to_ms(self.ttl), self.name, meta, intent_ms, SIGNAL_MS, passed]
        if intent_ms:
            self._intent = True
        return "lock_rw_write", keys, args

    #: True once this acquire call's tries left an intent (see :meth:`_stop_waiting_call`).
    _intent = False

    def _max_block(self) -> float:
        return min(super()._max_block(), WRITER_BLOCK)

    def _stop_waiting_call(self, owner: str) -> tuple[str, list[str], list[Any]] | None:
        if not self._intent:
            return None
        self._intent = False
        k = self._keys
        keys = [k.intent, k.read_signal, k.write_signal, k.waiters]
        return "lock_rw_unwait", keys, [owner, SIGNAL_MS]

    #: The read hold the last downgrade turned this object's write hold into.
    _downgraded_to: ReadLock | None = None

    def downgrade(self, ttl: float | None = None) -> ReadLock:
        """Turn this write hold into a read hold without letting another writer in.

        Returns the :class:`ReadLock` that now holds (same fence, its own member of
        the readers set); this write lock no longer holds anything, and leaving its
        ``with`` block releases nothing. The read hold is released like any other
        (``release()``, or its own ``with`` block: ``with writer.downgrade() as reader``).
        Safe to resend: a downgrade that reached Redis twice applies once.
        """
        reader = self._reader_for_downgrade(ttl)
        hold = self._require_hold("downgrade")
        call = self._downgrade_call(hold, reader)
        hold.releasing = True  # the write hold ends here either way: the watchdog leaves it
        # unknown outcome: the write hold ends by its TTL, or went on as a read hold that does
        self._downgraded(hold, reader, self._send_end(hold, call))
        return reader

    async def downgrade_async(self, ttl: float | None = None) -> ReadLock:
        """The asyncio twin of :meth:`downgrade`."""
        reader = self._reader_for_downgrade(ttl)
        hold = self._require_hold("downgrade")
        call = self._downgrade_call(hold, reader)
        hold.releasing = True
        # Cancelled: the downgrade is finished, then the read hold nobody will own is ended.
        member = Hold(f"{reader._rid}@{hold.fence}", hold.fence, hold.user)
        cleanup = (reader._release_call(member),)
        self._downgraded(hold, reader, await self._send_end_async(hold, call, cleanup))
        return reader

    def _reader_for_downgrade(self, ttl: float | None) -> ReadLock:
        kwargs: dict[str, Any] = {"ttl": self.ttl if ttl is None else ttl}
        kwargs["watchdog"] = self.watchdog
        return self.parent.read(**kwargs)

    def _downgrade_call(self, hold: Hold, reader: ReadLock) -> tuple[str, list[str], list[Any]]:
        k = self._keys
        ix = k.index
        keys = [k.writer, k.readers, k.read_signal, ix.expiry, k.reader_meta]
        meta = reader.meta(*current_user()[1:])
        reader._rid = reader._owner_for_attempt("")
        args = [hold.owner, hold.fence, to_ms(reader.ttl), self.name, meta, SIGNAL_MS, reader._rid]
        return "lock_rw_downgrade", keys, args

    def _downgraded(self, hold: Hold, reader: ReadLock, result: Any) -> None:
        self._forget(hold)
        if int(result) <= 0:
            hold.releasing = False
            self._report_lost(hold)
            raise self._lost_error(hold)
        self._downgraded_to = reader
        reader._from_downgrade = True
        reader._granted(reader._rid, hold.user, [1, hold.fence])

    def __exit__(self, *exc_info: object) -> None:
        if self._hold is None and self._downgraded_to is not None:
            self._downgraded_to = None  # the hold went on as a read hold: nothing to release
            return
        super().__exit__(*exc_info)

    async def __aexit__(self, *exc_info: object) -> None:
        if self._hold is None and self._downgraded_to is not None:
            self._downgraded_to = None
            return
        await super().__aexit__(*exc_info)

    def _start_acquire(
        self, blocking: bool | None, timeout: float | None
    ) -> tuple[bool, Any, str, str, float]:
        self._downgraded_to = None
        self._intent = False
        return super()._start_acquire(blocking, timeout)


class ReadWriteLock:
    """A read-write lock; build it with ``locks[alias].read_write_lock(name)``.

    ``rw.read()`` and ``rw.write()`` return fresh hold objects, so one
    ``ReadWriteLock`` can be shared by threads: ``with rw.read(): ...``.
    """

    def __init__(self, backend: Backend, name: str, **defaults: Any) -> None:
        self.backend = backend
        self.name = check_name(name)
        unknown = set(defaults) - {"ttl", "timeout", "blocking", "watchdog", "on_lost", "owner"}
        if unknown:
            raise InvalidArgument(f"read_write_lock() got unknown argument(s) {sorted(unknown)}")
        self.defaults = defaults
        self.keys = _RWKeys(backend, self.name)
        # Validate the defaults now, so a bad ttl fails where it was written.
        ReadLock(self, **defaults)

    def read(self, **kwargs: Any) -> ReadLock:
        """A new read hold object (not yet acquired); kwargs override the defaults."""
        return ReadLock(self, **{**self.defaults, **kwargs})

    def write(self, **kwargs: Any) -> WriteLock:
        """A new write hold object (not yet acquired); kwargs override the defaults."""
        return WriteLock(self, **{**self.defaults, **kwargs})

    async def state_async(self) -> dict[str, Any]:
        """The asyncio twin of :meth:`state`."""
        client = self.backend.async_client()
        with self.backend.errors():
            writer = await client.exists(self.keys.writer)
            readers = await client.zcard(self.keys.readers)
            intent = await client.exists(self.keys.intent)
        return {"writer": bool(writer), "readers": int(readers), "writer_waiting": bool(intent)}

    def state(self) -> dict[str, Any]:
        """``{"writer": bool, "readers": int, "writer_waiting": bool}`` (one round trip).

        ``readers`` may count a reader whose deadline passed a moment ago and that
        the next script on this lock will prune.
        """
        with self.backend.errors():
            pipe = self.backend.client.pipeline(transaction=False)
            pipe.exists(self.keys.writer)
            pipe.zcard(self.keys.readers)
            pipe.exists(self.keys.intent)
            writer, readers, intent = pipe.execute()
        return {"writer": bool(writer), "readers": int(readers), "writer_waiting": bool(intent)}

    def __repr__(self) -> str:
        return f"<ReadWriteLock {self.name!r}>"
