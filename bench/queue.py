"""Queue benchmark: django-redislock beside a raw pipelined ZADD baseline, RQ and Huey.

For each library, on one private server in one run:

* enqueue/s with one call per task, and in batches (where the library has them);
* drain/s of N no-op tasks with one worker process (``drain_queue``'s Worker, RQ's
  ``SimpleWorker`` in burst mode, Huey's consumer with one worker thread);
* round trips per task, counted at the client (every ``send_packed_command`` of
  redis-py is one request; a pipeline is one), and commands the server ran per
  task (``INFO commandstats``; commands inside Lua scripts count).

Each drain runs in a forked child process so no library shares a connection or
a warm cache with the parent.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import redis
from django.test import override_settings

from bench.common import CommandCounter, median, round_trips
from django_redislock import queues, task
from django_redislock.queue.worker import Worker

BATCH = 1000
COUNTS: dict[str, int] = {"huey": 0}


def noop(*args: Any, **kwargs: Any) -> None:
    """The task every library runs."""


redislock_noop = task(queue="bench", using="bench", name="bench.queue.redislock_noop")(noop)


def fresh(client: redis.Redis) -> redis.Redis:
    """A new client to the same server (for a forked child)."""
    kwargs = client.connection_pool.connection_kwargs
    return redis.Redis(host=kwargs["host"], port=kwargs["port"])


def timed(fn: Callable[[], Any]) -> tuple[float, int]:
    """Seconds ``fn`` took and the round trips it made."""
    with round_trips() as counter:
        start = time.perf_counter()
        fn()
        return time.perf_counter() - start, counter[0]


def in_child(fn: Callable[[], tuple[float, int]]) -> tuple[float, int]:
    """Run ``fn`` in a forked process and return its (seconds, round trips)."""
    ctx = multiprocessing.get_context("fork")
    parent, child = ctx.Pipe()

    def target() -> None:
        child.send(fn())

    process = ctx.Process(target=target)
    process.start()
    result: tuple[float, int] = parent.recv()
    process.join(60)
    return result


@dataclass
class Suite:
    """How one library enqueues one at a time, in batches (None: no batch API), and drains."""

    single: Callable[[int], Any]
    batch: Callable[[], Any] | None
    drain: Callable[[], tuple[float, int]]

    def one(self) -> None:
        """Enqueue tasks 0..n-1 one call each (how the drain queue is filled without a batch)."""
        for i in range(self.size):
            self.single(i)

    size: int = 0


# -- one module per library: (enqueue one, enqueue batch, drain) ----------------------------


def raw_suite(client: redis.Redis, n: int) -> Suite:
    key = "raw:{q}"

    def single(i: int) -> None:
        client.zadd(key, {f"t{i}": i})

    def batch() -> None:
        for start in range(0, n, BATCH):
            pipe = client.pipeline(transaction=False)
            for i in range(start, min(start + BATCH, n)):
                pipe.zadd(key, {f"t{i}": i})
            pipe.execute()

    def drain() -> tuple[float, int]:
        local = fresh(client)
        return timed(lambda: _zpop_all(local, key))

    return Suite(single, batch, drain, n)


def _zpop_all(client: redis.Redis, key: str) -> None:
    while client.zpopmin(key, 100):
        pass


def redislock_suite(client: redis.Redis, n: int) -> Suite:
    def single(i: int) -> None:
        redislock_noop.delay(i)

    def batch() -> None:
        redislock_noop.enqueue_many((((i,), {}) for i in range(n)), batch_size=BATCH)

    def drain() -> tuple[float, int]:
        worker = Worker([queues["bench"].queue("bench")], batch=100, burst=True)
        return timed(worker.run)

    return Suite(single, batch, drain, n)


def rq_suite(client: redis.Redis, n: int) -> Suite:
    import rq

    queue = rq.Queue("bench", connection=client)

    def single(i: int) -> None:
        queue.enqueue(noop, i)

    def batch() -> None:
        for start in range(0, n, BATCH):
            queue.enqueue_many(
                [rq.Queue.prepare_data(noop, (i,)) for i in range(start, min(start + BATCH, n))]
            )

    def drain() -> tuple[float, int]:
        local = fresh(client)
        worker = rq.SimpleWorker([rq.Queue("bench", connection=local)], connection=local)
        return timed(lambda: worker.work(burst=True, logging_level="WARNING"))

    return Suite(single, batch, drain, n)


def huey_suite(client: redis.Redis, n: int) -> Suite:
    from huey import RedisHuey

    kwargs = client.connection_pool.connection_kwargs
    huey = RedisHuey("bench", host=kwargs["host"], port=kwargs["port"])

    @huey.task()
    def huey_noop(i: int) -> None:
        COUNTS["huey"] += 1

    def single(i: int) -> None:
        huey_noop(i)

    def drain() -> tuple[float, int]:
        logging.getLogger("huey").setLevel(logging.WARNING)
        consumer = huey.create_consumer(workers=1, periodic=False, check_worker_health=False)

        def run() -> None:
            consumer.start()
            while COUNTS["huey"] < n:
                time.sleep(0.001)

        result = timed(run)
        consumer.stop(graceful=True)
        return result

    return Suite(single, None, drain, n)


SUITES = {
    "raw ZADD (baseline)": raw_suite,
    "django-redislock": redislock_suite,
    "RQ": rq_suite,
    "Huey": huey_suite,
}


#: Batch-enqueue passes are repeated this many times, interleaved across libraries, and the
#: best rate kept: on a shared 2-core machine a single pass mostly measures the neighbours.
ROUNDS = 3


def one_call_rates(client: redis.Redis, n: int) -> dict[str, tuple[float, float]]:
    """(tasks/s, round trips per task) of one-call enqueues, the libraries taking turns.

    Every iteration enqueues one task with each library, in a rotating order, timing each
    call: a burst of load from a neighbour then hits every library alike, which separate
    passes on a shared 2-core machine do not guarantee.
    """
    client.flushall()
    suites = {name: SUITES[name](client, n) for name in SUITES}
    for suite in suites.values():
        suite.single(-1)  # connections, scripts and registrations happen before the clock
    spent = dict.fromkeys(suites, 0.0)
    names = list(suites)
    clock = time.perf_counter
    for i in range(n):
        turn = i % len(names)
        for name in names[turn:] + names[:turn]:
            start = clock()
            suites[name].single(i)
            spent[name] += clock() - start
    result = {}
    for name, suite in suites.items():
        with round_trips() as counter:
            for i in range(n, n + 200):
                suite.single(i)
        result[name] = (n / spent[name], counter[0] / 200)
    return result


def batch_rate(name: str, client: redis.Redis, n: int) -> Any:
    """Tasks/s of one batch-enqueue pass, or "n/a" without a batch API."""
    client.flushall()
    suite = SUITES[name](client, n)
    if suite.batch is None:
        return "n/a"
    seconds, _ = timed(suite.batch)
    return n / seconds


def spread(values: list[float]) -> str:
    """The range of ``values`` as text."""
    return f"{min(values):,.0f}-{max(values):,.0f}"


def measure(client: redis.Redis, n_one: int, n_batch: int, n_drain: int) -> list[dict[str, Any]]:
    """Every figure over ROUNDS interleaved rounds: the median, its range, the per-round ratios.

    A round measures the one-call enqueues (the libraries taking turns call by call), one
    batch pass and one drain of each library, the libraries' order rotating per round.
    """
    names = list(SUITES)
    one: dict[str, list[float]] = {name: [] for name in names}
    batch: dict[str, list[Any]] = {name: [] for name in names}
    drains: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    trips: dict[str, float] = {}
    for turn in range(ROUNDS):
        for name, (rate, per_task) in one_call_rates(client, n_one).items():
            one[name].append(rate)
            trips[name] = per_task
        for name in names[turn:] + names[:turn]:
            batch[name].append(batch_rate(name, client, n_batch))
            row: dict[str, Any] = {}
            measure_drain(name, client, n_drain, row)
            drains[name].append(row)
        LOADS.append(os.getloadavg()[0])
    rows = []
    for name in names:
        drain_rates = [row["drain/s"] for row in drains[name]]
        batches = [rate for rate in batch[name] if rate != "n/a"]
        rows.append(
            {
                "library": name,
                "enqueue/s (1 call)": median(one[name]),
                "range (1 call)": spread(one[name]),
                "enqueue/s (batch)": median(batches) if batches else "n/a",
                "drain/s": median(drain_rates),
                "range (drain)": spread(drain_rates),
                "round trips/task (enqueue)": trips[name],
                "round trips/task (drain)": drains[name][-1]["round trips/task (drain)"],
                "server commands/task (drain)": drains[name][-1]["server commands/task (drain)"],
                "_one": one[name],
                "_drain": drain_rates,
            }
        )
    return rows


#: RQ drains this share of the tasks (its worker runs about 300 tasks/s on a quiet machine and
#: 40 on a loaded one: 20,000 of them would take the whole run); its rate is per task all the same
RQ_SHARE = 10


def measure_drain(name: str, client: redis.Redis, n: int, row: dict[str, Any]) -> None:
    """Fill the queue, then drain it with one worker in a forked child."""
    n = n // RQ_SHARE if name == "RQ" else n
    client.flushall()
    suite = SUITES[name](client, n)
    (suite.batch or suite.one)()
    counter = CommandCounter(client)
    counter.reset()
    seconds, trips = in_child(suite.drain)
    row["drain/s"] = n / seconds
    row["round trips/task (drain)"] = trips / n
    row["server commands/task (drain)"] = counter.total() / n


#: Load average (1 min) at the end of each round.
LOADS: list[float] = []


COLUMNS = [
    "library",
    "enqueue/s (1 call)",
    "range (1 call)",
    "enqueue/s (batch)",
    "drain/s",
    "range (drain)",
    "round trips/task (enqueue)",
    "round trips/task (drain)",
    "server commands/task (drain)",
]


def run(server: Any, quick: bool) -> dict[str, Any]:
    n_one, n_batch, n_drain = (500, 2000, 2000) if quick else (5000, 20000, 20000)
    client = server.client()
    alias = {
        "bench": {
            "LOCATION": server.url,
            "KEY_PREFIX": "bench",
            "OPTIONS": {"COMMIT_MODE": "immediate"},
        }
    }
    LOADS.clear()
    with override_settings(REDISLOCK_QUEUES=alias):
        rows = measure(client, n_one, n_batch, n_drain)
    ratios = notes(rows, n_one, n_batch, n_drain)
    for row in rows:
        del row["_one"], row["_drain"]
    return {
        "name": "queue",
        "columns": COLUMNS,
        "rows": rows,
        "notes": ratios,
    }


def notes(rows: list[dict[str, Any]], n_one: int, n_batch: int, n_drain: int) -> list[str]:
    by = {row["library"]: row for row in rows}
    ours, rq_row, huey_row = by["django-redislock"], by["RQ"], by["Huey"]

    def per_round(a: list[float], b: list[float]) -> str:
        ratios = sorted(x / y for x, y in zip(a, b, strict=True))
        return f"{median(ratios):.2f}x ({ratios[0]:.2f}-{ratios[-1]:.2f})"

    def ratio(a: Any, b: Any) -> str:
        return f"{a / b:.2f}x" if isinstance(a, float) and isinstance(b, float) else "n/a"

    return [
        f"Median of {ROUNDS} interleaved rounds, range beside it; ratios are the median (range) "
        "of the per-round ratios. A round: "
        f"{n_one} one-call enqueues per library, the libraries taking turns call by call; "
        f"one pass of {n_batch} batch enqueues (batches of {BATCH}); "
        f"{n_drain} no-op tasks drained by one worker process (forked; RQ "
        f"{n_drain // RQ_SHARE}). Load average at the "
        f"end of each round: {', '.join(f'{load:.1f}' for load in LOADS)} on "
        f"{os.cpu_count()} CPUs. Reproduce: python3 dev.py bench queue.",
        "django-redislock enqueues through @task.delay() (JSON envelope, dedup script); its "
        "drain claims 100 tasks per script call and acks them with the next claim "
        "(at-least-once). RQ's SimpleWorker also keeps results and job hashes; Huey's consumer "
        "pops with BRPOP and is at-most-once (a task popped by a dying consumer is lost). The "
        "raw row pops with ZPOPMIN, at-most-once, and runs nothing.",
        f"one-call enqueue vs Huey: {per_round(ours['_one'], huey_row['_one'])} (target >= 1.3x)",
        f"batch enqueue vs RQ enqueue_many: "
        f"{ratio(ours['enqueue/s (batch)'], rq_row['enqueue/s (batch)'])} (target >= 3x)",
        f"drain vs Huey: {per_round(ours['_drain'], huey_row['_drain'])} (target >= 4x); "
        f"vs RQ: {per_round(ours['_drain'], rq_row['_drain'])}",
    ]
