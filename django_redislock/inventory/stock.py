"""A :class:`Stock`: the units of one item on sale, taken atomically with their order task.

Keys (all share the order queue's hash tag, so the take script can also write
the queue on a Cluster)::

    <prefix>:{q:<queue>}:stock:<item>:units         string  units left
    <prefix>:{q:<queue>}:stock:<item>:meta          hash    opens, closes (µs); taken, restored
    <prefix>:{q:<queue>}:stock:<item>:buyers        set     buyers holding a live reservation
    <prefix>:{q:<queue>}:stock:<item>:reservations  hash    reservation id -> qty:time:buyer
    <prefix>:{q:<queue>}:stock:<item>:req:<id>      string  one call's answer, for a resend
                                                            (expires after 60 s)
    <prefix>:{q:<queue>}:stock:<item>:adm:item      string  admission limits' state (GCRA),
    <prefix>:{q:<queue>}:stock:<item>:adm:buyer:<b> string  expiring when idle

A stock without an order task uses its own tag, ``{stock:<item>}``.

A stock split over N buckets (``set(units, shards=N)``) keeps these keys as its bucket 0
and puts bucket ``i`` in the slot of the order queue ``<queue>.s<i>`` (or of the tag
``{stock.s<i>:<item>}``): see :mod:`.shards`.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any, TypeVar

from ..conf import DEFAULT_ALIAS
from ..exceptions import ConfigurationError, InvalidArgument
from ..queue.registry import TaskFunction
from ..queue.sending import run_call, run_call_async
from ..validation import (
    check_buyer,
    check_item,
    check_name,
    check_units,
    parse_rate,
)
from . import shards as sharding
from .calls import (
    KEY_PARTS,
    TAKE_SCRIPT,
    StockCall,
    StockKeys,
    admission_args,
    admission_at,
    check_data,
    hash_tag,
    probed,
    restore_call,
    take_call,
    take_queue_keys,
)
from .reads import StockReads
from .records import BUCKET_MARK, Reservation, Take, TakeResult
from .setup import StockSetup
from .sold_out import Ticket, channel, memory
from .sold_out_counts import counts

if TYPE_CHECKING:
    from ..backends.redis import RedisQueueBackend
    from ..queue.queue import Queue

R = TypeVar("R")
T = TypeVar("T", bound="Take | None")


class Stock(StockSetup, StockReads):
    """The units of one item on sale, on the Redis of a ``REDISLOCK_QUEUES`` alias.

    ``Stock("phone-x", order_task=create_order)`` takes units and queues
    ``create_order(reservation=...)`` in the same Lua script, on the task's queue
    and alias (``queue=`` and ``using=`` override them; ``using`` may also be a
    queue backend instance). Without ``order_task`` a take only records the
    reservation, and turning it into an order is the caller's job. ``admission``
    and ``buyer_admission`` (rates such as ``"500/s"``, ``"1/m"``) cap the takes of
    the item and of each buyer, checked in the take script itself (docs/seckill.md,
    "Admission").
    """

    def __init__(
        self,
        item: str,
        *,
        order_task: TaskFunction[..., Any] | None = None,
        queue: str | None = None,
        using: str | RedisQueueBackend | None = None,
        admission: str | None = None,
        buyer_admission: str | None = None,
    ) -> None:
        self.item = check_item(item)
        self.admission = None if admission is None else parse_rate(admission, "admission")
        self.buyer_admission = (
            None if buyer_admission is None else parse_rate(buyer_admission, "buyer_admission")
        )
        if order_task is not None and not isinstance(order_task, TaskFunction):
            raise InvalidArgument(
                f"order_task must be a function decorated with @task, got {order_task!r}"
            )
        self.order_task = order_task
        if queue is None and order_task is not None:
            queue = order_task.queue_name
        self.queue_name = None if queue is None else check_name(queue)
        if using is None:
            using = order_task.using if order_task is not None else DEFAULT_ALIAS
        self.using = using
        self._keys: StockKeys | None = None
        #: this object's bucket of its item (0: the item's own keys; see :mod:`.shards`)
        self._index = 0
        #: the buckets' objects, by index (built once per object)
        self._buckets: dict[int, Stock] = {}

    def __repr__(self) -> str:
        return f"<Stock {self.item!r} queue={self.queue_name!r}>"

    # -- where it lives ---------------------------------------------------------------------

    @property
    def backend(self) -> RedisQueueBackend:
        """The queue backend whose Redis holds this stock."""
        if not isinstance(self.using, str):
            return self.using
        from ..backends.redis import RedisBackendMixin
        from ..handlers import queues

        backend = queues[self.using]
        if not isinstance(backend, RedisBackendMixin):
            raise ConfigurationError(
                f"REDISLOCK_QUEUES[{self.using!r}] is a {type(backend).__name__}; "
                "inventory needs a Redis queue backend"
            )
        return backend  # type: ignore[return-value]

    @property
    def queue(self) -> Queue | None:
        """The queue order tasks are written to, or None without an order task."""
        if self.queue_name is None:
            return None
        found: Queue = self.backend.queue(self.queue_name)
        return found

    def _built_keys(self) -> StockKeys:
        backend = self.backend
        if self._keys is None or self._keys.backend is not backend:
            queue = self.queue
            if queue is None:
                tag = "stock" if self._index == 0 else f"stock.s{self._index}"
                parts: tuple[str, ...] = (f"{tag}:{self.item}",)
                public: list[str] = []
                scripts: list[str] = []
                take: list[str] = []
            else:
                parts = (hash_tag(queue.keys[0]), "stock", self.item)
                public, scripts = list(queue.keys), [*queue.script_keys, queue.rates_key]
                take = take_queue_keys(queue)
            own = [backend.key(*parts, part) for part in KEY_PARTS]
            request = backend.key(*parts, "req", "")
            admission = backend.key(*parts, "adm", "")
            self._keys = StockKeys(backend, own, public, scripts, take, request, admission)
        return self._keys

    def keys(self, with_queue: bool = False) -> list[str]:
        """The stock's keys (and the order queue's, taken from the queue itself).

        Of a sharded stock, bucket 0's; ``bucket(i).keys()`` gives bucket ``i``'s.
        """
        keys = self._built_keys()
        return keys.own + keys.queue if with_queue else list(keys.own)

    def _script_keys(self, call: StockCall[Any]) -> list[str]:
        """KEYS of ``call``: the stock's own, its request key (if any), the order queue's."""
        keys = self._built_keys()
        out = list(keys.own)
        if call.request:
            out.append(keys.request + call.request)
        if call.with_queue:
            out += keys.queue_take if call.script == TAKE_SCRIPT else keys.queue_scripts
        return out

    def _script_call(self, call: StockCall[Any]) -> tuple[str, list[str], list[Any]]:
        args = [*call.args, channel(self.backend)] if call.announces else call.args
        keys = self._script_keys(call)
        at = admission_at(call)
        if call.script == TAKE_SCRIPT and len(args) > at:  # admission: its keys, and where
            prefix = self._built_keys().admission
            args = [*args[:at], len(keys) + 1, *args[at + 1 :]]
            keys += [prefix + "item", f"{prefix}buyer:{args[1]}"]
        return call.script, keys, args

    def _run(self, call: StockCall[R]) -> R:
        try:
            return call.parse(run_call(self.backend, self._script_call(call)))
        finally:
            self._changed(call)

    async def _arun(self, call: StockCall[R]) -> R:
        try:
            return call.parse(await run_call_async(self.backend, self._script_call(call)))
        finally:
            self._changed(call)

    def _changed(self, call: StockCall[Any]) -> None:
        """This process's own change is seen at once (others' arrive through the channel)."""
        if call.announces:
            memory.forget(self.backend, self._built_keys().own[0])

    # -- the hot path -----------------------------------------------------------------------

    def _take_args(self, qty: int, buyer: Any, data: Any) -> tuple[int, str, dict[str, Any]]:
        """The checked arguments of a take (bad input raises before Redis is touched)."""
        return check_units(qty, "qty", allow_zero=False), check_buyer(buyer), check_data(data)

    def _refused_here(self, qty: int) -> Take | None:
        """A refusal this process knows without Redis (:mod:`.sold_out`), or None.

        Counted in this process (:mod:`.sold_out_counts`): Redis hears of it at the next flush.
        """
        keys = self._built_keys()
        units = memory.refuses(self.backend, keys.own[0], qty)
        if units is None:
            return None
        counts.count(keys.backend, keys.own, True)
        return Take(TakeResult.SOLD_OUT, units)

    def _probing(self) -> bool:
        """True when this process saw the stock sold out: a take reads the units first."""
        return memory.known(self.backend, self._built_keys().own[0])

    def _took(self, take: T, ticket: Ticket) -> T:
        """Remember a sold-out answer (the next takes are refused here) and count it; forget
        any other."""
        keys = self._built_keys()
        key = keys.own[0]
        if take is not None and take.result is TakeResult.SOLD_OUT:
            counts.count(keys.backend, keys.own, False)  # answered by Redis (script or probe)
            memory.remember(self.backend, key, take.remaining, ticket)
        else:
            memory.forget(self.backend, key)
            if take is not None and take.result is TakeResult.UNKNOWN:
                self._forget_shards()
        return take

    def _take_call(self, qty: int, buyer: Any, data: dict[str, Any] | None) -> StockCall[Take]:
        qty, buyer, data = self._take_args(qty, buyer, data)
        return self._full_take_call(qty, buyer, data)

    def _full_take_call(self, qty: int, buyer: str, data: dict[str, Any]) -> StockCall[Take]:
        id = uuid.uuid4().hex + (f"{BUCKET_MARK}{self._index}" if self._index else "")
        reservation = Reservation(self.item, id, buyer, qty, None, data)
        payload = None
        if self.order_task is not None and not self._eager:
            payload = self._order_payload(reservation)
        return take_call(reservation, payload, admission_args(self.admission, self.buyer_admission))

    def _order_payload(self, reservation: Reservation) -> bytes:
        """The order task's serialized payload (validated like any enqueue)."""
        assert self.order_task is not None and self.queue is not None
        payload = self.order_task.payload((), {"reservation": reservation.as_dict()})
        return self.queue.prepare(reservation.id, payload).data

    @property
    def _eager(self) -> bool:
        return bool(self.backend.options["EAGER"])

    def _after_take(self, take: Take) -> Take:
        """In ``EAGER`` mode (tests of user code) the order task runs inline."""
        if take.reservation is not None and self.order_task is not None and self._eager:
            self.order_task(reservation=take.reservation.as_dict())
        return take

    def take(self, qty: int = 1, *, buyer: str | int, data: dict[str, Any] | None = None) -> Take:
        """Take ``qty`` units for ``buyer`` and queue the order task, in one atomic script.

        Returns a :class:`Take` whose ``result`` is a :class:`TakeResult`;
        refusals (sold out, already bought, not open, ended, unknown item) change
        nothing. On OK, ``take.reservation.id`` is also the order task's id and a
        natural order number. ``data`` (a dict JSON can hold, checked with or
        without an order task) travels to the order task inside the reservation;
        it is not stored with the reservation itself. ``buyer`` is normalised by
        :func:`~django_redislock.validation.check_buyer`. Bad arguments
        raise ``InvalidArgument`` before Redis is touched. A resend of the call by a
        retrying client (its reply was lost) answers what the first run answered
        and takes nothing; see docs/seckill.md, "Timeouts, lost replies and resends".
        """
        qty, buyer, checked = self._take_args(qty, buyer, data)
        shards = self._shard_count()
        if shards > 1:
            return sharding.take(self, shards, qty, buyer, checked)
        known = self._refused_here(qty)
        if known is not None:
            return known
        ticket = memory.ticket(self.backend)
        if self._probing():
            refused = self._took(probed(self._read_units(), qty), ticket)
            if refused is not None:
                return refused
        call = self._full_take_call(qty, buyer, checked)
        self._register_queue()
        return self._after_take(self._took(self._run(call), ticket))

    async def take_async(
        self, qty: int = 1, *, buyer: str | int, data: dict[str, Any] | None = None
    ) -> Take:
        """The asyncio twin of :meth:`take` (an eager order task runs in the event loop)."""
        qty, buyer, checked = self._take_args(qty, buyer, data)
        shards = await self._shard_count_async()
        if shards > 1:
            return await sharding.take_async(self, shards, qty, buyer, checked)
        known = self._refused_here(qty)
        if known is not None:
            return known
        ticket = memory.ticket(self.backend)
        if self._probing():
            refused = self._took(probed(await self._read_units_async(), qty), ticket)
            if refused is not None:
                return refused
        call = self._full_take_call(qty, buyer, checked)
        if self.queue_name is not None:
            await self.backend.register_queue_async(self.queue_name)
        return self._after_take(self._took(await self._arun(call), ticket))

    def _register_queue(self) -> None:
        """List the order queue for ``drain_queue`` and the admin (once per process)."""
        if self.queue_name is not None:
            self.backend.register_queue(self.queue_name)

    # -- compensation -----------------------------------------------------------------------

    def _restore_call(self, reservation: Reservation | str, rebuy: bool) -> StockCall[bool]:
        if isinstance(reservation, Reservation):
            if reservation.item != self.item:
                raise InvalidArgument(
                    f"reservation is of item {reservation.item!r}, not {self.item!r}"
                )
            reservation = reservation.id
        if not isinstance(reservation, str) or not reservation:
            raise InvalidArgument(f"reservation must be a Reservation or its id: {reservation!r}")
        return restore_call(reservation, rebuy, self.queue_name is not None)

    def restore(self, reservation: Reservation | str, *, rebuy: bool = True) -> bool:
        """Give a reservation's units back; False if it was already restored (idempotent).

        Call it from the code that owns the order's fate: the task that gives up
        on creating it, or the one that expires it unpaid. The order task of this
        reservation is removed from the queue in the same script, whether it is
        waiting, in flight or dead-lettered, so it can never run (again) for a unit
        that is back on sale. A run already under way cannot be stopped: the order
        step checks that the reservation is still live (:meth:`reservation`)
        before it orders; see docs/seckill.md. With ``rebuy`` (the default) the
        buyer may buy again. A resend of the call by a retrying client answers
        True again and restores nothing twice (a second call of your own is a new
        request: False). On a sharded stock the reservation's id names its bucket, and the
        units go back there (docs/seckill.md, "A sale over many shards").
        """
        call = self._restore_call(reservation, rebuy)
        shards = self._shard_count()
        if shards == 1 and sharding.bucket_of(call.args[0]) == 0:
            return self._run(call)
        return sharding.restore(self, shards, reservation, rebuy)

    async def restore_async(self, reservation: Reservation | str, *, rebuy: bool = True) -> bool:
        """The asyncio twin of :meth:`restore`."""
        call = self._restore_call(reservation, rebuy)
        shards = await self._shard_count_async()
        if shards == 1 and sharding.bucket_of(call.args[0]) == 0:
            return await self._arun(call)
        return await sharding.restore_async(self, shards, reservation, rebuy)
