"""Per-queue rates and trends: counts per minute and per second in fixed-size time buckets.

Each queue has ONE hash (``Queue.rates_key``, under the queue's hash tag) holding
two rings of slots, 60 one-minute slots and 180 one-second slots (the layout is
described in ``scripts/fragments/rates.lua``). A slot remembers which bucket
(minute or second since the epoch, by the server's ``TIME``) it holds and is
cleared when a later bucket reuses it, so the hash stays bounded (a few
thousand fields at most) and an idle hour leaves no stale counts behind: the
reader skips every slot whose bucket is not one of the last 60 minutes or 180
seconds, and the hash expires a week and two hours after its last write.

For the day and the week, a minute slot's counts are rolled up into two coarser
rings when the slot is reused (96 slots of 15 minutes, 84 of two hours: 1,080
more fields at most, about 30 KB measured; see docs/admin.md); :func:`read_long`
adds the minute slots not rolled up yet, so the counts are exact at that scale.
The roll-up runs once per minute slot, not per task.

Who writes what, at no round trip of its own:

* ``enqueued``: the enqueue scripts (``queue_enqueue``, a flash sale's
  ``stock_take`` for its order task, ``periodic_enqueue`` for a tick), in the
  same script as the tasks themselves; a resent enqueue queues nothing and
  counts nothing. ``requeue_dead`` and the admin's requeue are not counted.
* ``succeeded``, ``failed``, ``retried``, ``dead`` and failures by exception
  type: the worker, once a second, in the batch that also adds to the
  outcome counters (:func:`add_to_pipeline`). Like those counters, a worker
  killed with SIGKILL loses at most its last second, and a lease that expires
  (its worker died) is not an outcome here. Tasks acked by code of your own
  (``pop``/``ack`` without the worker) are not counted.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from ..calls.batch import Batch

#: The outcomes counted, in the order the charts show them.
OUTCOMES = ("enqueued", "succeeded", "failed", "retried", "dead")
#: The worker's outcomes (its counters also have "lost", which is no rate).
WORKER_OUTCOMES = frozenset(OUTCOMES[1:])
#: (ring, seconds per bucket, slots): as in ``fragments/rates.lua``.
MINUTES = ("m", 60, 60)
SECONDS = ("s", 1, 180)
#: Longest exception type name kept (the rest is cut).
MAX_TYPE_NAME = 200


def type_name(exc: BaseException) -> str:
    """The exception's type as its traceback names it (``builtins`` left out), capped."""
    kind = type(exc)
    module = kind.__module__
    name = kind.__qualname__ if module == "builtins" else f"{module}.{kind.__qualname__}"
    return name.replace("\n", " ")[:MAX_TYPE_NAME]


def add_to_pipeline(batch: Batch, queue: Any, counts: Counter[str], types: Counter[str]) -> None:
    """Add the rates call for ``counts`` (outcome -> n) and ``types`` to ``batch``.

    An ``EVALSHA``: the worker sends its outcome batch with ``resend="missing"``,
    so a server that answers ``NOSCRIPT`` gets this call again, alone, after the
    script is loaded, and the counters sent beside it are not applied twice.
    """
    outcomes = [(k, v) for k, v in counts.items() if k in WORKER_OUTCOMES and v]
    kinds = [(k, v) for k, v in types.items() if v]
    if not outcomes and not kinds:
        return
    args: list[Any] = [len(outcomes)]
    for name, value in (*outcomes, *kinds):
        args += [name, value]
    batch.add("rates_add", [queue.rates_key], args)


@dataclass
class Trend:
    """A queue's rates: per outcome, counts per minute (60, oldest first) and per second (180).

    ``minute_start`` and ``second_start`` are the epoch seconds of the first bucket;
    the last bucket is the current, still filling one. ``types`` counts failures by
    exception type over the hour, most frequent first.
    """

    now: int
    minute_start: int
    second_start: int
    minutes: dict[str, list[int]] = field(default_factory=dict)
    seconds: dict[str, list[int]] = field(default_factory=dict)
    types: list[tuple[str, int]] = field(default_factory=list)

    def total(self, outcome: str) -> int:
        """The outcome's count over the last hour."""
        return sum(self.minutes.get(outcome, ()))

    def per_minute(self, outcome: str, window: int = 5) -> float:
        """The outcome's count over the last ``window`` minutes (the current one included,
        as far as it has gone) divided by ``window``: a burst shows at once."""
        counts = self.minutes.get(outcome, [])[-window:]
        return sum(counts) / window if counts else 0.0

    @property
    def empty(self) -> bool:
        return not any(any(v) for v in self.minutes.values())


def ring_counts(
    fields: dict[str, str], ring: tuple[str, int, int], now: int
) -> tuple[int, dict[str, list[int]]]:
    """The counts of one ring, oldest bucket first, ending with the bucket of ``now``.

    A slot whose recorded bucket is not the one expected at its position (stale:
    nothing was written to it since it came round again) counts as zero.
    """
    prefix, width, size = ring
    current = now // width
    counts: dict[str, list[int]] = {outcome: [0] * size for outcome in OUTCOMES}
    for i in range(size):
        bucket = current - size + 1 + i
        slot = f"{prefix}{bucket % size}"
        if fields.get(slot) != str(bucket):
            continue
        for outcome in OUTCOMES:
            counts[outcome][i] = _int(fields.get(f"{slot}:{outcome}"))
    return (current - size + 1) * width, counts


def failure_types(fields: dict[str, str], now: int) -> list[tuple[str, int]]:
    """Failures per exception type over the minute slots that are current, most first."""
    prefix, width, size = MINUTES
    current = now // width
    totals: Counter[str] = Counter()
    for bucket in range(current - size + 1, current + 1):
        slot = f"{prefix}{bucket % size}"
        if fields.get(slot) != str(bucket):
            continue
        for name in fields.get(f"{slot}:t", "").split("\n"):
            if name:
                totals[name] += _int(fields.get(f"{slot}:t:{name}"))
    return sorted(totals.items(), key=lambda item: (-item[1], item[0]))


def parse(reply: list[Any]) -> Trend:
    """The rates script's reply (server time, then the hash's fields and values)."""
    now = int(reply[0])
    flat = [_text(value) for value in reply[1:]]
    fields = dict(zip(flat[::2], flat[1::2], strict=True))
    minute_start, minutes = ring_counts(fields, MINUTES, now)
    second_start, seconds = ring_counts(fields, SECONDS, now)
    return Trend(now, minute_start, second_start, minutes, seconds, failure_types(fields, now))


def read(queue: Any) -> Trend:
    """The queue's rates now (one script call)."""
    backend = queue.backend
    with backend.errors():
        reply = backend.script("rates_read")(keys=[queue.rates_key])
    return parse(reply)


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _int(value: str | None) -> int:
    try:
        return int(value) if value is not None else 0
    except ValueError:  # another writer's junk: shown as nothing, never a crash
        return 0


#: The coarse rings (as in ``fragments/rates.lua``): (name, seconds per bucket, buckets).
DAY = ("day", 900, 96)
WEEK = ("week", 7200, 84)


@dataclass
class LongTrend:
    """A queue's counts per outcome over the day (96 x 15 min) and the week (84 x 2 h).

    ``starts`` gives the epoch second of each ring's first bucket; the last bucket of
    each is the current one, still filling. Downsampled in Redis from the minute slots
    (see ``fragments/rates.lua``): failure types are not kept at this scale.
    """

    now: int
    starts: dict[str, int] = field(default_factory=dict)
    counts: dict[str, dict[str, list[int]]] = field(default_factory=dict)

    def total(self, ring: str, outcome: str) -> int:
        return sum(self.counts.get(ring, {}).get(outcome, ()))


def long_call(queue: Any) -> tuple[str, list[str], list[Any]]:
    """The day-and-week script of ``queue``, to send in a page's pipeline."""
    return ("rates_long", [queue.rates_key], [])


def parse_long(reply: list[Any]) -> LongTrend:
    """The ``rates_long`` reply (a key of another type gives empty rings)."""
    now = int(reply[0])
    trend = LongTrend(now)
    at = 1
    for name, width, size in (DAY, WEEK):
        if at >= len(reply):
            first = (now // width - size + 1) * width
            trend.starts[name] = first
            trend.counts[name] = {outcome: [0] * size for outcome in OUTCOMES}
            continue
        trend.starts[name] = int(reply[at])
        at += 1
        trend.counts[name] = {}
        for outcome in OUTCOMES:
            trend.counts[name][outcome] = [int(v) for v in reply[at : at + size]]
            if len(trend.counts[name][outcome]) != size:
                raise ValueError(f"short rates_long reply for {name}")
            at += size
    return trend


def read_long(queue: Any) -> LongTrend:
    """The queue's day and week now (one script call)."""
    backend = queue.backend
    with backend.errors():
        reply = backend.script("rates_long")(keys=[queue.rates_key])
    return parse_long(reply)
