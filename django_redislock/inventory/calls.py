"""How each stock operation is sent: keys, validated ARGV and the reply parser.

As in the queue (:mod:`django_redislock.queue.calls`), one :class:`StockCall`
describes a request, and the blocking and asyncio methods of
:class:`~django_redislock.inventory.Stock` only differ in how they send it, so
they cannot drift apart.

Every call that changes a stock (take, restore, set, add, clear) carries a request
key in the same EVALSHA (no extra round trip): the script records its answer
there for :data:`REQUEST_TTL_MS`, and a resend of the same call (a client
with a retry policy, such as a redis-py ``Retry`` in ``CLIENT_KWARGS`` or the
cluster client's default retries, resends a command after a connection error
or a timeout) finds it, answers exactly what the first call answered and
changes nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Generic, NamedTuple, TypeVar

from ..calls.requests import request_id
from ..exceptions import InvalidArgument
from ..queue.calls import QueueCalls
from ..queue.keys import KEY_PARTS as QUEUE_KEY_PARTS
from ..queue.records import from_micros
from ..queue.serializers import JSONSerializer
from ..validation import Rate
from ..wire import to_text
from .records import TAKE_CODES, Reconciliation, Reservation, StockStats, Take, TakeResult

if TYPE_CHECKING:
    from ..backends.redis import RedisQueueBackend

R = TypeVar("R")

#: A stock's own keys, in the order of every stock script's KEYS.
KEY_PARTS = ("units", "meta", "buyers", "reservations")
#: The take script, the one stock script that gets only part of the order queue's keys.
TAKE_SCRIPT = "stock_take"
#: How long a request's answer is kept for a resend (ms): far longer than any client retries
#: one call (its socket timeouts and backoff), short enough that the records stay few.
REQUEST_TTL_MS = 60_000


#: Largest ``data`` of one take, as JSON (it travels in the order task's payload).
MAX_DATA_BYTES = 64 * 1024
#: The encoder that checks ``data`` (built once: it is shared by threads, like the queue's).
JSON = JSONSerializer()


def check_data(data: Any) -> dict[str, Any]:
    """A take's ``data``: None or a dict that JSON can hold, at most ``MAX_DATA_BYTES`` encoded.

    Checked the same way with or without an order task, so a take never
    accepts ``data`` that an order task could not carry.
    """
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise InvalidArgument(f"data must be a dict or None, got {type(data).__name__}")
    try:
        size = len(JSON.dumps(data))
    except InvalidArgument as exc:
        raise InvalidArgument(f"data: {exc}") from None
    if size > MAX_DATA_BYTES:
        raise InvalidArgument(f"data is {size} bytes as JSON, over {MAX_DATA_BYTES}")
    return dict(data)


@dataclass(frozen=True)
class StockCall(Generic[R]):
    """One script call: its name, ARGV, a parser, whether it needs the order queue's keys.

    ``request`` names the call's request key (the part after ``req:``) for the
    scripts that change the stock; reads have none. ``announces``: the script may bring
    units back, and publishes the stock on the backend's stock-changes channel, given as
    its last ARGV (:mod:`.sold_out`).
    """

    script: str
    args: list[Any]
    parse: Callable[[Any], R]
    with_queue: bool = False
    request: str = ""
    announces: bool = False


class StockKeys(NamedTuple):
    """A stock's key names on one backend (built once: they are on every call's hot path)."""

    backend: RedisQueueBackend
    own: list[str]
    #: the order queue's keys (``Queue.keys``)
    queue: list[str]
    #: the keys the queue's own scripts get (``Queue.script_keys``: also its claims hash)
    queue_scripts: list[str]
    #: the order queue's keys the take script writes (:func:`~.calls.take_queue_keys`)
    queue_take: list[str]
    #: the prefix of this stock's request keys (``...:req:``)
    request: str
    #: the prefix of its admission keys (``...:adm:``: ``item``, ``buyer:<buyer>``)
    admission: str


def hash_tag(key: str) -> str:
    """The ``{hash tag}`` of a key built by ``backend.key()`` (without the braces)."""
    start = key.index("{") + 1
    return key[start : key.index("}", start)]


def take_queue_keys(queue: QueueCalls) -> list[str]:
    """The order queue's keys a take writes, in the take script's KEYS[6..10] order.

    An enqueue of one fresh id with no delay at level 0 writes the pending zset, the
    payload and enqueue-time hashes, the signal list and the rates; the queue's other
    keys (in flight, dead letters, attempts, errors, claims, priorities) only matter
    for an id that was queued before, so the take does not send them.
    """
    pending, payload = (queue.keys[QUEUE_KEY_PARTS.index(part)] for part in ("pending", "payload"))
    return [pending, payload, queue.signal_key, queue.enqueued_key, queue.rates_key]


def admission_args(item: Rate | None, buyer: Rate | None) -> list[Any] | None:
    """The take script's admission limits (after the index of their keys), or None."""
    if item is None and buyer is None:
        return None
    out: list[Any] = []
    for rate in (item, buyer):
        out += ["", ""] if rate is None else [rate.interval, rate.burst]
    return out


def admission_at(call: StockCall[Any]) -> int:
    """Where a take's admission arguments start in its ARGV (0-based): after the payload."""
    return 5 if call.with_queue else 4


def take_call(
    reservation: Reservation, payload: bytes | None, admission: list[Any] | None = None
) -> StockCall[Take]:
    """The take script for ``reservation``; ``payload`` is the serialized order task or None.

    ARGV: quantity, buyer, reservation id, the record's TTL, then the payload only with an
    order task (a take without one sends no empty argument: each costs the server a Lua
    string). ``admission``: the four limit arguments (:func:`admission_args`), or None; they
    follow an empty slot that the caller fills with the index of the admission keys once it
    knows the keys (:func:`admission_at`). The reply's type says the outcome: see
    ``stock_take.lua``.
    """

    def parse(reply: Any) -> Take:
        if isinstance(reply, int):  # sold out: the units left
            return Take(TakeResult.SOLD_OUT, reply)
        if not isinstance(reply, list):  # taken (or a resend of a take that took)
            units, at = to_text(reply).split(":")
            return Take(TakeResult.OK, int(units), replace(reservation, taken_at=int(at)))
        code, left, now = (int(value) for value in reply)
        result = TAKE_CODES[code]
        if result is TakeResult.RATE_LIMITED:
            return Take(result, left, retry_after=now / 1_000_000)
        return Take(result, left)

    args: list[Any] = [reservation.qty, reservation.buyer, reservation.id, REQUEST_TTL_MS]
    if payload is not None:
        args.append(payload)
    if admission:
        args += ["", *admission]
    # the reservation id is fresh per take: it names the request too
    return StockCall(TAKE_SCRIPT, args, parse, payload is not None, reservation.id)


def probed(units: Any, qty: int) -> Take | None:
    """What a probe read (the units key, one ``GET``): a take's refusal, or None (take it).

    A client that saw a stock sold out reads its units before it builds a take: no
    reservation id, no order payload (a sold-out crowd costs the client no uuid and no
    JSON) and no script at the server, one ``GET``. The take script answers the same
    refusals first, from the same value (no stock; fewer units than asked for), so a
    probe answers what a take would. A read changes nothing: its resend is harmless.
    """
    if units is None:
        return Take(TakeResult.UNKNOWN, 0)
    left = int(units)
    return Take(TakeResult.SOLD_OUT, left) if left < qty else None


def restore_call(reservation_id: str, rebuy: bool, with_queue: bool) -> StockCall[bool]:
    """The restore script: True when the reservation was live and its units came back."""
    args = [reservation_id, "1" if rebuy else "0", REQUEST_TTL_MS]
    return StockCall("stock_restore", args, restored, with_queue, request_id(), True)


def restored(reply: list[Any]) -> bool:
    """The restore script's reply: True when the units came back."""
    return bool(int(reply[0]))


def set_call(mode: str, units: int, opens: str, closes: str) -> StockCall[int]:
    """The set script (``mode`` "set" or "add"): the units left, or -1 for an unknown stock.

    A window that would close before it opens is refused (InvalidArgument, nothing
    changed): here when both bounds are given, by the script when one is kept.
    """
    if opens not in ("", "0") and closes not in ("", "0") and int(closes) <= int(opens):
        raise InvalidArgument(
            f"closes ({from_micros(int(closes)).isoformat()}) must be after opens "
            f"({from_micros(int(opens)).isoformat()}): the sale would never be open"
        )

    def parse(reply: Any) -> int:
        if int(reply) == -2:
            raise InvalidArgument(
                "closes must be after opens: with the window bound kept from the stored "
                "sale, it would close before it opens (nothing was changed)"
            )
        return int(reply)

    args = [mode, units, opens, closes, REQUEST_TTL_MS]
    return StockCall("stock_set", args, parse, request=request_id(), announces=True)


def clear_call() -> StockCall[bool]:
    """The clear script: True if the stock existed."""
    return StockCall("stock_clear", [REQUEST_TTL_MS], bool, request=request_id(), announces=True)


#: The refusals the stock's meta hash counts (``refused_<name>``), in the stats script's
#: order: the take script's own (one ``HINCRBY`` when it refuses), then the sold-out ones,
#: which the take never writes (a sold-out take stays one read at the server,
#: docs/guarantees.md, and most never reach Redis: the local flag). Each process counts
#: those and flushes them every few seconds (:mod:`.sold_out_counts`).
REFUSALS = ("duplicate", "not_open", "ended", "admission", "sold_out_redis", "sold_out_local")


def stats_call(item: str) -> StockCall[StockStats]:
    """The stats script, parsed into a :class:`StockStats`."""

    def parse(reply: list[Any]) -> StockStats:
        units, opens, closes, taken, restored, buyers, live, now = (int(v) for v in reply[:8])
        return StockStats(
            item=item,
            exists=units >= 0,
            remaining=max(units, 0),
            taken=taken,
            restored=restored,
            buyers=buyers,
            reservations=live,
            opens=from_micros(opens) if opens else None,
            closes=from_micros(closes) if closes else None,
            now=from_micros(now),
            refused=dict(zip(REFUSALS, (int(v) for v in reply[8:]), strict=False)),
        )

    return StockCall("stock_stats", [], parse)


def reconcile_call(item: str, fix: bool) -> StockCall[Reconciliation]:
    """The reconcile script (a fix is idempotent: a resend finds nothing left to fix)."""

    def parse(reply: list[Any]) -> Reconciliation:
        exists, units, taken, restored, reserved, live, buyers, missing, bad, fixed = (
            int(value) for value in reply
        )
        return Reconciliation(
            item,
            bool(exists),
            units,
            taken,
            restored,
            reserved,
            live,
            buyers,
            missing,
            bad,
            bool(fixed),
        )

    return StockCall("stock_reconcile", ["1" if fix else "0"], parse)
