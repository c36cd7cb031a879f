"""Rates and trends (queue/rates.py, scripts/fragments/rates.lua) on real servers.

The bucket arithmetic is tested by running the fragment itself with a chosen
clock (a test wrapper passes ``now`` in, the app's scripts pass the server's
``TIME``), then reading the hash back with the app's parser at a chosen ``now``.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from django_redislock import task
from django_redislock.calls.batch import Batch
from django_redislock.queue import Queue
from django_redislock.queue import outcomes as outcomes_module
from django_redislock.queue import rates as rates_module
from django_redislock.queue.rates import OUTCOMES, parse, read
from django_redislock.queue.worker import Worker, counters_key
from django_redislock.scripts import fragment

from .conftest import RedisTarget, make_queue

pytestmark = pytest.mark.django_db(transaction=True)

#: Runs the fragment's rate_add at ARGV[1] seconds with ARGV[2] counts, ARGV[3] types (JSON).
WRAPPER = (
    fragment("rates")
    + """
local types = cjson.decode(ARGV[3])
if next(types) == nil then types = nil end
rate_add(KEYS[1], tonumber(ARGV[1]), cjson.decode(ARGV[2]), types)
return 1
"""
)

T0 = 1_800_000_000 - 1_800_000_000 % 3600  # a whole hour, so minute and slot 0 line up


@pytest.fixture(params=["single", "cluster"])
def target(request: pytest.FixtureRequest) -> RedisTarget:
    found: RedisTarget = request.getfixturevalue(f"{request.param}_target")
    return found


def add_at(
    raw: Any, key: str, now: int, counts: dict[str, int], types: dict[str, int] | None = None
) -> None:
    raw.eval(WRAPPER, 1, key, now, json.dumps(counts), json.dumps(types or {}))


def trend_at(raw: Any, key: str, now: int) -> rates_module.Trend:
    fields = raw.hgetall(key)
    flat: list[Any] = [now]
    for name, value in fields.items():
        flat += [name, value]
    return parse(flat)


KEY = "t:{rates}:rates"


def test_a_minute_rollover_starts_a_new_bucket(single_target: RedisTarget) -> None:
    raw = single_target.raw
    add_at(raw, KEY, T0 + 59, {"enqueued": 3})
    add_at(raw, KEY, T0 + 60, {"enqueued": 5})
    add_at(raw, KEY, T0 + 119, {"enqueued": 1, "failed": 2})
    trend = trend_at(raw, KEY, T0 + 119)
    assert trend.minutes["enqueued"][-2:] == [3, 6]
    assert trend.minutes["failed"][-2:] == [0, 2]
    assert trend.minute_start == T0 + 60 - 59 * 60
    assert trend.total("enqueued") == 9
    # per second: three separate buckets, the last at the end of the ring
    assert trend.seconds["enqueued"][-1] == 1 and trend.seconds["enqueued"][-60] == 5
    assert trend.seconds["enqueued"][-61] == 3
    # a minute later the first one is still in the hour; 59 minutes later it has left it
    assert trend_at(raw, KEY, T0 + 60 * 60).minutes["enqueued"][0] == 6
    assert trend_at(raw, KEY, T0 + 60 * 60 + 59).total("enqueued") == 6
    assert trend_at(raw, KEY, T0 + 60 * 61).total("enqueued") == 0


def test_an_idle_hour_resets_stale_slots(single_target: RedisTarget) -> None:
    raw = single_target.raw
    add_at(raw, KEY, T0 + 10, {"enqueued": 7, "dead": 1}, {"ValueError": 4})
    # an hour later the same slot comes round again: the old counts must not add up
    add_at(raw, KEY, T0 + 3600 + 20, {"enqueued": 2}, {"KeyError": 1})
    trend = trend_at(raw, KEY, T0 + 3600 + 20)
    assert trend.total("enqueued") == 2 and trend.total("dead") == 0
    assert trend.types == [("KeyError", 1)]
    # the slot was cleared, not just hidden: no field of the old bucket survives
    fields = {k.decode() for k in raw.hkeys(KEY)}
    assert "m0:dead" not in fields and "m0:t:ValueError" not in fields
    # read two hours later without any write: every slot is stale, all counts zero
    late = trend_at(raw, KEY, T0 + 3 * 3600)
    assert late.empty and late.types == [] and not any(any(v) for v in late.seconds.values())


def test_the_second_ring_wraps_after_three_minutes(single_target: RedisTarget) -> None:
    raw = single_target.raw
    add_at(raw, KEY, T0, {"succeeded": 4})
    add_at(raw, KEY, T0 + 180, {"succeeded": 1})  # same second slot, 180 s later
    trend = trend_at(raw, KEY, T0 + 180)
    assert sum(trend.seconds["succeeded"]) == 1 and trend.seconds["succeeded"][-1] == 1
    assert trend.total("succeeded") == 5  # both are in the hour's minutes


def test_failure_types_are_bounded_per_minute(single_target: RedisTarget) -> None:
    raw = single_target.raw
    types = {f"app.errors.Error{i}": 1 for i in range(30)}
    add_at(raw, KEY, T0 + 5, {"failed": 30}, types)
    add_at(raw, KEY, T0 + 6, {"failed": 2}, {"app.errors.Error0": 2})
    trend = trend_at(raw, KEY, T0 + 6)
    names = dict(trend.types)
    assert len(names) == 21 and names["(other)"] == 10
    assert sum(names.values()) == 32
    assert len(raw.hkeys(KEY)) < 2 * 240 + 25


def test_the_hash_expires_after_an_idle_time(single_target: RedisTarget) -> None:
    raw = single_target.raw
    add_at(raw, KEY, T0, {"enqueued": 1})
    # a week and two hours: the day's and the week's rings live in the same hash
    assert 7_200_000 < raw.pttl(KEY) <= 612_000_000


#: Runs the fragment's rate_count (the enqueue scripts' fast path) at ARGV[1] seconds (text).
COUNT_WRAPPER = (
    fragment("rates")
    + """
rate_count(KEYS[1], ARGV[1], ARGV[2], ARGV[3])
return 1
"""
)


def test_rate_count_writes_what_rate_add_writes(single_target: RedisTarget) -> None:
    """rate_count cuts the slots' names out of a constant and checks the minute as a number:
    over three hours and a quarter (every minute and second slot, both rings wrapping, the
    day's ring rolled up) it leaves the same hash as rate_add, which formats them."""
    raw = single_target.raw
    count_key, add_key = "t:{rates}:count", "t:{rates}:add"
    now = T0 - 7
    while now < T0 + 3 * 3600 + 900:
        n = now % 3 + 1
        raw.eval(COUNT_WRAPPER, 1, count_key, str(now), "enqueued", str(n))
        add_at(raw, add_key, now, {"enqueued": n})
        now += 7 if now % 5 else 1
    assert raw.hgetall(count_key) == raw.hgetall(add_key)
    assert trend_at(raw, count_key, now) == trend_at(raw, add_key, now)


def test_the_rates_hash_is_kept_as_a_hashtable(single_target: RedisTarget) -> None:
    """A small hash in the listpack encoding is scanned and rewritten by every HINCRBY: the
    fragment turns the rates hash into a hashtable from its first write on, and again after
    it comes back compact (a restart loads a small hash as a listpack), with no field more."""
    raw = single_target.raw
    raw.eval(COUNT_WRAPPER, 1, KEY, str(T0), "enqueued", "1")
    assert raw.object("encoding", KEY) == b"hashtable"
    fields = raw.hgetall(KEY)
    assert fields == {
        b"m0": b"30000000",
        b"m0:enqueued": b"1",
        b"s0": b"1800000000",
        b"s0:enqueued": b"1",
    }
    raw.delete(KEY)
    raw.hset(KEY, mapping=fields)  # as a restart would load it
    assert raw.object("encoding", KEY) == b"listpack"
    raw.eval(COUNT_WRAPPER, 1, KEY, str(T0 + 1), "enqueued", "1")
    assert raw.object("encoding", KEY) == b"listpack"  # checked once a minute, not a second
    raw.eval(COUNT_WRAPPER, 1, KEY, str(T0 + 60), "enqueued", "1")
    assert raw.object("encoding", KEY) == b"hashtable"
    assert b"-" not in raw.hkeys(KEY)


@pytest.fixture
def queue(target: RedisTarget) -> Iterator[Queue]:
    yield make_queue(target, "rated", RETRY_BACKOFF=0.001, RETRY_JITTER=False)


def test_enqueues_are_counted_once(queue: Queue) -> None:
    queue.enqueue("a", {"x": 1})
    queue.enqueue("a", {"x": 1})  # a duplicate is kept out, and not counted
    assert queue.enqueue_many([(f"b{i}", None) for i in range(7)]) == [True] * 7
    queue.enqueue("a", {"x": 2}, replace=True)  # rescheduled: counted
    trend = read(queue)
    assert trend.total("enqueued") == 9
    assert sum(trend.seconds["enqueued"]) == 9
    assert queue.backend.client.ttl(queue.rates_key) > 0
    # the read script picks the current slots' fields: the same as parsing the whole hash
    assert trend == trend_at(queue.backend.client, queue.rates_key, trend.now)


def test_a_one_call_enqueue_clears_slots_of_an_older_bucket(queue: Queue) -> None:
    """The enqueue script's one-task path checks the slots' buckets itself and leaves a stale
    slot to the fragment: the old counts are cleared (the minute's rolled up), not added to."""
    raw: Any = queue.backend.client
    for attempt in range(5):  # the server's second must not change between seeding and enqueue
        raw.delete(queue.rates_key)
        now_s = int(raw.time()[0])
        minute = now_s // 60
        m, s = f"m{minute % 60}", f"s{now_s % 180}"
        raw.hset(
            queue.rates_key,
            mapping={m: minute - 60, f"{m}:enqueued": 5, s: now_s - 180, f"{s}:enqueued": 7},
        )
        assert queue.enqueue(f"a{attempt}", None)
        if int(raw.time()[0]) == now_s:
            break
    fields = {k.decode(): v.decode() for k, v in raw.hgetall(queue.rates_key).items()}
    assert fields[m] == str(minute) and fields[f"{m}:enqueued"] == "1"
    assert fields[s] == str(now_s) and fields[f"{s}:enqueued"] == "1"
    trend = read(queue)
    assert sum(trend.seconds["enqueued"]) == 1 and trend.minutes["enqueued"][-1] == 1
    # the stale minute went to the day's ring (it is an hour old: still in the day)
    assert any(name.startswith("q") and name.endswith(":enqueued") for name in fields)


def test_async_enqueues_are_counted(queue: Queue) -> None:
    async def scenario() -> None:
        await queue.enqueue_async("a", None)
        await queue.enqueue_many_async([("b", None), ("c", None)])
        await queue.enqueue_async("a", None, replace=True)

    asyncio.run(scenario())
    assert read(queue).total("enqueued") == 4


def test_a_purge_keeps_the_rates(queue: Queue) -> None:
    queue.enqueue_many([(f"t{i}", None) for i in range(5)])
    queue.purge()
    assert read(queue).total("enqueued") == 5


#: What the drain's tasks did, for the exact counts.
FLAKY: Counter[str] = Counter()


class PaymentDeclined(Exception):
    """A failure type of the drain's flaky task."""


@task(queue="drain-rates", name="tests.rates.fine")
def fine(n: int) -> int:
    return n


@task(queue="drain-rates", name="tests.rates.flaky", max_attempts=2)
def flaky(n: int) -> None:
    FLAKY[str(n)] += 1
    if n % 2:
        raise PaymentDeclined(f"order {n} <script>declined</script>")
    raise KeyError(n)


def fill(queue: Queue) -> None:
    for start in range(0, 10_000, 1000):
        queue.enqueue_many([(f"t{i}", fine.payload([i], None)) for i in range(start, start + 1000)])
    queue.enqueue_many([(f"f{i}", flaky.payload([i], None)) for i in range(10)])


def drain(queue: Queue) -> tuple[Any, int]:
    """Drain ``queue`` in this process: the summary and the round trips it made."""
    from bench.common import round_trips

    worker = Worker([queue], batch=100, burst=True)
    with round_trips() as trips:
        summary = worker.run()
    return summary, trips[0]


@pytest.mark.slow
def test_a_drain_of_10000_tasks_gives_exact_counts(target: RedisTarget) -> None:
    backend = target.queue_backend(RETRY_BACKOFF=0.001, RETRY_JITTER=False)
    warm = backend.queue("drain-warm")  # the server learns the scripts (NOSCRIPT round trips)
    warm.enqueue_many([("w", fine.payload([1], None)), ("f", flaky.payload([1], None))])
    drain(warm)
    drained = backend.queue("drain-rates")
    fill(drained)
    FLAKY.clear()
    summary, trips = drain(drained)
    # 10 flaky tasks: 10 first runs retried, 10 second runs dead
    assert (summary.succeeded, summary.failed, summary.retried, summary.dead) == (
        10_000,
        20,
        10,
        10,
    )
    assert sum(FLAKY.values()) == 20
    trend = read(drained)
    totals = {outcome: trend.total(outcome) for outcome in OUTCOMES}
    # a retry is no new task: enqueued counts what producers queued
    assert totals == {
        "enqueued": 10_010,
        "succeeded": 10_000,
        "failed": 20,
        "retried": 10,
        "dead": 10,
    }
    assert {key: sum(v) for key, v in trend.seconds.items()} == totals
    assert dict(trend.types) == {f"{__name__}.PaymentDeclined": 10, "KeyError": 10}
    counters = backend.client.hgetall(counters_key(drained))
    assert int(counters[b"succeeded"]) == 10_000

    # the same drain with the rates left out of the counters pipeline: the same round trips,
    # but for those that come with time, not tasks (acks and counters at least once a second:
    # a loaded machine makes one drain slower than the other)
    bare = backend.queue("drain-bare")
    fill(bare)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(outcomes_module, "add_to_pipeline", lambda *args: None)
        bare_summary, bare_trips = drain(bare)
    assert bare_summary.processed == summary.processed
    assert read(bare).total("succeeded") == 0  # the patch did leave the rates out
    # what the test guards is "no round trip per task" (a per-task trip would add 10,000);
    # the trips that come with time are allowed for both drains' time, not the longer one's:
    # under load (two CPU burners beside the suite) the drain with the rates made 6 more
    # trips than the bare one in 1.4 s, against the 4 the longer drain's time allowed
    timed = 2 * (int(summary.elapsed + bare_summary.elapsed) + 2)
    assert trips <= bare_trips + timed, (trips, bare_trips, summary.elapsed, bare_summary.elapsed)
    print(f"round trips of a 10,020-task drain: {trips} with rates, {bare_trips} without")


def test_a_foreign_key_at_the_rates_name_fails_nothing(queue: Queue) -> None:
    client = queue.backend.client
    client.set(queue.rates_key, "another program's string")
    assert queue.enqueue("a", None) is True  # queued, nothing counted, no error
    (task,) = queue.pop(1)
    assert queue.retry(task, delay=0, error="boom") == "retried"
    batch = Batch(client)
    rates_module.add_to_pipeline(batch, queue, Counter(failed=1), Counter(KeyError=1))
    # no error: the script leaves the foreign key alone
    assert not [reply for reply in batch.execute() if isinstance(reply, Exception)]
    assert client.get(queue.rates_key) == b"another program's string"
    assert queue.stats()["ready"] == 1


@task(queue="sale-orders", name="tests.rates.order")
def order(reservation: Any = None) -> None:
    """The order task of the sale below."""


def test_sale_orders_count_as_enqueued(target: RedisTarget) -> None:
    from django_redislock.inventory import Stock

    backend = target.queue_backend()
    stock = Stock("sku-1", order_task=order, using=backend)
    stock.set(5)
    assert stock.take(buyer="b1").ok and stock.take(buyer="b2").ok
    assert not stock.take(buyer="b1").ok  # refused: queues nothing, counts nothing
    assert read(backend.queue("sale-orders")).total("enqueued") == 2


def test_a_sale_order_clears_rate_slots_of_an_older_bucket(single_target: RedisTarget) -> None:
    """The take counts its order task with rate_count's fast path inline and leaves a stale
    slot to the fragment: the old counts are cleared (the minute's rolled up), not added to."""
    from django_redislock.inventory import Stock

    backend = single_target.queue_backend()
    stock = Stock("sku-2", order_task=order, using=backend)
    stock.set(10)
    key = backend.queue("sale-orders").rates_key
    raw: Any = backend.client
    for attempt in range(5):  # the server's second must not change between seeding and take
        raw.delete(key)
        now_s = int(raw.time()[0])
        minute = now_s // 60
        m, s = f"m{minute % 60}", f"s{now_s % 180}"
        raw.hset(
            key, mapping={m: minute - 60, f"{m}:enqueued": 5, s: now_s - 180, f"{s}:enqueued": 7}
        )
        assert stock.take(buyer=f"b{attempt}").ok
        if int(raw.time()[0]) == now_s:
            break
    fields = {k.decode(): v.decode() for k, v in raw.hgetall(key).items()}
    assert fields[m] == str(minute) and fields[f"{m}:enqueued"] == "1"
    assert fields[s] == str(now_s) and fields[f"{s}:enqueued"] == "1"
    assert any(name.startswith("q") and name.endswith(":enqueued") for name in fields)
    assert stock.take(buyer="late").ok  # the fast path now: both slots hold this second
    assert read(backend.queue("sale-orders")).total("enqueued") == 2
