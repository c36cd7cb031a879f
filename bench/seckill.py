"""Seckill benchmark: takes per second, beside the floor and beside a naive database.

Rows, on one private server in one run:

* raw DECR-with-check Lua script: the floor, one key, no buyer check, no order;
* ``Stock.take`` without an order task (window, buyer set, units, reservation);
* ``Stock.take`` with the order task queued in the same script (what the shop does);
* a naive database implementation: ``select_for_update()`` on the stock row, a
  duplicate-buyer query, the decrement and the order insert in one transaction, on
  SQLite and on PostgreSQL (a bench-only pair of tables, created and dropped);
* the example shop end to end: buy requests/s over HTTP under gunicorn with 4 workers.

Each is measured from one client and from 8 threads of one process, in interleaved rounds
(:func:`rounds_of`): every row in each round, the order rotated by one each round, so a
neighbour's burst of load hits every row alike; ratios to the floor are taken within a
round. Every figure is the median of the rounds with its range.

``run`` first writes the ``seckill_server`` table (the same cases measured at the server,
:func:`server_rows`), then returns this one.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, ClassVar

from django.db import connections, models, transaction

from bench import serverload
from bench.common import (
    LoadAverage,
    between,
    interleaved,
    median,
    percentile,
    rotated,
    save,
    spread,
    table,
)
from django_redislock.backends.redis import RedisQueueBackend
from django_redislock.calls.script import script, sha_of
from django_redislock.inventory import Stock, sold_out
from django_redislock.queue.registry import task

ROOT = Path(__file__).resolve().parent.parent
UNITS = 10**9  # never sells out during a run
PG = {
    "ENGINE": "django.db.backends.postgresql",
    "NAME": os.environ.get("BENCH_PG_NAME", "test"),
    "USER": os.environ.get("BENCH_PG_USER", "postgres"),
    "HOST": os.environ.get("BENCH_PG_HOST", "127.0.0.1"),
    "PORT": os.environ.get("BENCH_PG_PORT", "5432"),
}
FLOOR = """
local n = tonumber(redis.call('GET', KEYS[1]) or '0')
if n < 1 then return -1 end
return redis.call('DECR', KEYS[1])
"""


@task(queue="bench-orders", using="bench", name="bench.seckill.create_order")
def create_order(reservation: dict[str, Any]) -> None:
    """Never runs here: the bench measures the take and the enqueue only."""


class NaiveStock(models.Model):
    units = models.IntegerField()
    # Django adds the default manager; django-stubs adds it only to models of installed apps
    objects: ClassVar[models.Manager[NaiveStock]]

    class Meta:
        app_label = "testapp"
        db_table = "bench_seckill_stock"

    def __str__(self) -> str:
        return f"{self.units} units"


class NaiveOrder(models.Model):
    stock = models.ForeignKey(NaiveStock, on_delete=models.CASCADE)
    buyer = models.CharField(max_length=64)
    objects: ClassVar[models.Manager[NaiveOrder]]

    class Meta:
        app_label = "testapp"
        db_table = "bench_seckill_order"
        unique_together = [("stock", "buyer")]

    def __str__(self) -> str:
        return self.buyer


class Crew:
    """``threads`` threads kept for the whole run, each calling one function until a deadline.

    The threads (and their Redis and database connections) live across passes, so a pass
    can be a short slice that takes turns with the other rows' slices.
    """

    def __init__(self, threads: int) -> None:
        self.jobs: list[queue.SimpleQueue[tuple[Callable[[], Any], float] | None]] = [
            queue.SimpleQueue() for _ in range(threads)
        ]
        self.done: queue.SimpleQueue[tuple[int, int]] = queue.SimpleQueue()
        self.threads = [
            threading.Thread(target=self._loop, args=(jobs,), daemon=True) for jobs in self.jobs
        ]
        for thread in self.threads:
            thread.start()

    def _loop(self, jobs: queue.SimpleQueue[tuple[Callable[[], Any], float] | None]) -> None:
        try:
            while (job := jobs.get()) is not None:
                fn, end = job
                calls = errors = 0
                while True:
                    try:
                        fn()
                    except Exception:
                        errors += 1
                    calls += 1
                    if time.perf_counter() >= end:
                        break
                self.done.put((calls, errors))
        finally:
            connections.close_all()

    def run(self, fn: Callable[[], Any], seconds: float) -> tuple[int, int, float]:
        """Calls and errors of ``fn`` from every thread over ``seconds``, and the time taken."""
        start = time.perf_counter()
        for jobs in self.jobs:
            jobs.put((fn, start + seconds))
        found = [self.done.get() for _ in self.jobs]
        elapsed = time.perf_counter() - start
        return sum(c for c, _ in found), sum(e for _, e in found), elapsed

    def close(self) -> None:
        for jobs in self.jobs:
            jobs.put(None)
        for thread in self.threads:
            thread.join(60)


def crew_round(
    crew: Crew, cases: dict[str, Callable[[], Any]], seconds: float, slice_s: float
) -> dict[str, tuple[float, int]]:
    """One round of :func:`bench.common.interleaved` with a crew of threads per call:
    ``{case: (calls/s, errors)}``, the cases taking turns in slices in their given order,
    reversed every other turn."""
    order = list(cases)
    calls, errors = dict.fromkeys(order, 0), dict.fromkeys(order, 0)
    spent = dict.fromkeys(order, 0.0)
    turn = 0
    while min(spent.values()) < seconds:
        for name in order if turn % 2 == 0 else order[::-1]:
            done, failed, elapsed = crew.run(cases[name], slice_s)
            calls[name] += done
            errors[name] += failed
            spent[name] += elapsed
        turn += 1
    return {name: (calls[name] / spent[name], errors[name]) for name in order}


def buyers() -> Callable[[], str]:
    counter = itertools.count()
    return lambda: f"b{next(counter)}"


@dataclass
class Row:
    """One implementation: its label, what it runs (the idiom), one call, a check at the end."""

    label: str
    runs: str
    call: Callable[[], Any]
    check: Callable[[int], None] = lambda errors: None


def warmed(fn: Callable[[], Any], calls: int = 100) -> Callable[[], Any]:
    """``fn``, called ``calls`` times first (connections, scripts, the first query plans)."""
    for _ in range(calls):
        fn()
    return fn


# -- Redis rows ------------------------------------------------------------------------


def redis_rows(server: Any) -> list[Row]:
    backend = RedisQueueBackend("bench", {"LOCATION": server.url, "KEY_PREFIX": "bench"})
    client = server.client()
    client.set("floor:stock", UNITS)
    floor = backend.client.register_script(FLOOR)
    rows = [
        Row(
            FLOOR_ROW,
            "one EVALSHA of a 3-line GET/DECR script (a redis-py Script object, reused)",
            warmed(lambda: floor(keys=["floor:stock"])),
        )
    ]
    for item, label, order_task, runs in (
        ("bench-take", "take, no order task", None, "stock.take(buyer=...), one reused Stock"),
        (
            "bench-take-order",
            "take + order enqueue",
            create_order,
            "stock.take(buyer=...), one reused Stock(order_task=...)",
        ),
    ):
        stock = Stock(item, order_task=order_task, queue="bench-orders", using=backend)
        stock.set(UNITS)
        counter = itertools.count()
        take = partial(lambda stock, counter: stock.take(buyer=f"b{next(counter)}"), stock, counter)
        rows.append(Row(f"django-redislock {label}", runs, warmed(take), took_all(stock, counter)))
    # the example shop's idiom (shop/tasks.py sale_stock): a new Stock object per request
    stock = Stock("bench-take-new", order_task=create_order, queue="bench-orders", using=backend)
    stock.set(UNITS)
    counter = itertools.count()

    def per_call() -> Any:
        new = Stock("bench-take-new", order_task=create_order, queue="bench-orders", using=backend)
        return new.take(buyer=f"b{next(counter)}")

    rows.append(
        Row(
            "django-redislock take + order enqueue, new Stock per call",
            "Stock(item, order_task=...).take(buyer=...) per call, as the example shop",
            warmed(per_call),
            took_all(stock, counter),
        )
    )
    return rows


def took_all(stock: Stock, counter: Iterator[int]) -> Callable[[int], None]:
    """A check that every take took one unit (none was answered "no such stock")."""

    def check(errors: int) -> None:
        calls = next(counter)
        taken = UNITS - stock.remaining()
        if taken != calls - errors:
            raise RuntimeError(f"{stock.item}: {taken} units taken by {calls - errors} takes")

    return check


# -- naive database rows -----------------------------------------------------------------


def naive_take(alias: str, next_buyer: Callable[[], str]) -> bool:
    """The usual first attempt: lock the stock row, check, decrement, insert the order."""
    with transaction.atomic(using=alias):
        stock = NaiveStock.objects.using(alias).select_for_update().get(pk=1)
        buyer = next_buyer()
        if (
            stock.units < 1
            or NaiveOrder.objects.using(alias).filter(stock=stock, buyer=buyer).exists()
        ):
            return False
        stock.units -= 1
        stock.save(update_fields=["units"])
        NaiveOrder.objects.using(alias).create(stock=stock, buyer=buyer)
        return True


def add_database(alias: str, params: dict[str, Any]) -> None:
    """Register a database alias at run time (the bench runs under the tests' settings)."""
    configured = connections.configure_settings(
        {"default": connections.settings["default"], alias: params}
    )
    connections.settings[alias] = configured[alias]


@contextlib.contextmanager
def naive_tables(alias: str, params: dict[str, Any]) -> Iterator[str | None]:
    """The naive tables on ``alias``, dropped after; yields why they could not be made, or None."""
    add_database(alias, params)
    try:
        with connections[alias].schema_editor() as editor:
            editor.create_model(NaiveStock)
            editor.create_model(NaiveOrder)
    except Exception as exc:
        yield f"skipped ({type(exc).__name__})"
        return
    try:
        NaiveStock.objects.using(alias).create(pk=1, units=UNITS)
        yield None
    finally:
        connections.close_all()
        with connections[alias].schema_editor() as editor:
            editor.delete_model(NaiveOrder)
            editor.delete_model(NaiveStock)
        connections[alias].close()


next_buyer = buyers()

NAIVE = "in atomic(): select_for_update().get(), exists(), save(), create()"


def database_rows(stack: contextlib.ExitStack, tmp: Path) -> tuple[list[Row], list[dict[str, Any]]]:
    """The naive rows that could run, and a row saying why for those that could not."""
    sqlite = {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": str(tmp / "naive.sqlite3"),
        "OPTIONS": {"timeout": 20},
    }
    rows, skipped = [], []
    for alias, label, params in (
        ("bench_sqlite", "naive select_for_update, SQLite", sqlite),
        ("bench_pg", "naive select_for_update, PostgreSQL", PG),
    ):
        why = stack.enter_context(naive_tables(alias, params))
        if why is not None:
            skipped.append({"implementation": label, "what it runs": NAIVE, COLUMNS[2]: why})
            continue
        rows.append(Row(label, NAIVE, warmed(partial(naive_take, alias, next_buyer))))
    return rows, skipped


# -- end to end --------------------------------------------------------------------------


@dataclass
class ShopCalls:
    """What the shop row's buy requests answered: (from the main thread, status, ms) each."""

    answers: list[tuple[bool, int, float]] = field(default_factory=list)

    def crew(self) -> list[tuple[int, float]]:
        return [(status, ms) for main, status, ms in self.answers if not main]


def shop_row(stack: contextlib.ExitStack, server: Any, tmp: Path) -> tuple[Row, ShopCalls]:
    """One buy request through the example shop under gunicorn (4 workers), per call."""
    sys.path.insert(0, str(ROOT / "example_project"))
    from shop.server import running
    from shop.swarm import Swarm

    env = {
        "SHOP_DATA_DIR": str(tmp / "shop"),
        "SHOP_REDIS_URL": server.url,
        "DJANGO_SETTINGS_MODULE": "shopsite.settings",
    }
    (tmp / "shop").mkdir()
    sale_id = open_shop_sale(env)
    port = stack.enter_context(running(4, env))
    swarm = Swarm(port, sale_id, concurrency=8)
    swarm.fetch_csrf()
    swarm.warm_up(32)
    sent = itertools.count()
    calls = ShopCalls()

    def buy() -> None:
        answer = swarm.buy(f"h{next(sent)}")
        main = threading.current_thread() is threading.main_thread()
        calls.answers.append((main, answer.status, answer.seconds * 1000))

    warmed(buy, 32)
    calls.answers.clear()
    row = Row(
        "example shop over HTTP (gunicorn, 4 workers)",
        "POST /sale/<id>/buy (keep-alive): Django view, CSRF, the take + order enqueue",
        buy,
    )
    return row, calls


def open_shop_sale(env: dict[str, str], units: int = UNITS) -> int:
    """Migrate the shop's database and open a sale of ``units``; its id."""
    code = (
        "from decimal import Decimal; from django.core.management import call_command; "
        "from shop.models import Product; from shop.services import open_sale; "
        "call_command('migrate', verbosity=0); "
        f"print(open_sale(Product.objects.create(name='bench', price=Decimal(1)), {units}).pk)"
    )
    manage = str(ROOT / "example_project" / "manage.py")
    out = subprocess.run(
        [sys.executable, manage, "shell", "-c", code],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    if out.returncode:
        raise RuntimeError(f"opening the shop's sale failed: {out.stderr[-2000:]}")
    return int(out.stdout.strip().splitlines()[-1])


FLOOR_ROW = "raw DECR-with-check Lua (floor)"
SHOP_ROW = "example shop over HTTP (gunicorn, 4 workers)"
COLUMNS = [
    "implementation",
    "what it runs",
    "1 client/s (median)",
    "1 client/s (range)",
    "1 client x floor",
    "8 threads/s (median)",
    "8 threads/s (range)",
    "8 threads x floor",
    "errors (8 threads, all rounds)",
    "p50 / p99 ms (8 threads)",
]
#: per row: rounds of (1-client calls/s, 8-thread calls/s, 8-thread errors)
Found = dict[str, list[tuple[float, float, int]]]


def run(server: Any, quick: bool) -> dict[str, Any]:
    at_server, server_notes = server_rows(server, 3 if quick else 5, 0.5 if quick else 1.0)
    path = save(
        {
            "name": "seckill_server",
            "columns": list(at_server[0]),
            "rows": at_server,
            "notes": server_notes,
        }
    )
    print(f"\n## seckill at the server\n\n{table(at_server, list(at_server[0]))}\n")
    print("\n".join(f"- {note}" for note in server_notes), f"\n(written to {path})", flush=True)
    return client_table(server, quick)


def client_table(server: Any, quick: bool) -> dict[str, Any]:
    """The client-side table: every row in each of the rounds, the order rotated."""
    rounds, seconds = (3, 0.2) if quick else (5, 0.6)
    server.client().flushall()
    with tempfile.TemporaryDirectory() as name, contextlib.ExitStack() as stack:
        tmp = Path(name)
        rows = redis_rows(server)
        naive, skipped = database_rows(stack, tmp)
        rows += naive
        shop, shop_calls = shop_row(stack, server, tmp)
        rows.append(shop)
        crew = Crew(8)
        try:
            found, loads = rounds_of(rows, crew, rounds, seconds)
        finally:
            crew.close()
        for row in rows:
            row.check(sum(errors for _, _, errors in found[row.label]))
    server.client().flushall()
    table_rows = [summary(row, found) for row in rows] + skipped
    by = {row["implementation"]: row for row in table_rows}
    latencies = sorted(ms for _, ms in shop_calls.crew())
    by[SHOP_ROW]["errors (8 threads, all rounds)"] = sum(
        1 for status, _ in shop_calls.crew() if status != 202
    )
    by[SHOP_ROW]["p50 / p99 ms (8 threads)"] = (
        f"{percentile(latencies, 50):.1f} / {percentile(latencies, 99):.1f}"
    )
    refused = sum(1 for _, status, _ in shop_calls.answers if status != 202)
    return {
        "name": "seckill",
        "columns": COLUMNS,
        "rows": table_rows,
        "plots": ["1 client/s (median)", "8 threads/s (median)"],
        "notes": notes(found, rounds, seconds, loads, refused),
    }


def rounds_of(
    rows: list[Row], crew: Crew, rounds: int, seconds: float
) -> tuple[Found, LoadAverage]:
    """Each row's calls/s in ``rounds`` rounds. A round: every row for ``seconds`` from one
    client, in 50 ms slices taking turns (:func:`bench.common.interleaved`), then every row
    for ``seconds`` from the crew's 8 threads, in 100 ms slices taking turns; the rows'
    order rotated by one each round."""
    found: Found = {row.label: [] for row in rows}
    loads = LoadAverage()
    for n in range(rounds):
        order = rotated(rows, n)
        one = interleaved({row.label: row.call for row in order}, seconds=seconds, rounds=1)[0]
        eight = crew_round(crew, {row.label: row.call for row in order}, seconds, 0.1)
        for row in rows:
            found[row.label].append((one[row.label], *eight[row.label]))
        loads.sample()
    return found, loads


def summary(row: Row, found: Found) -> dict[str, Any]:
    """A row of the table: medians and ranges of the rounds, ratios to the floor per round."""
    mine, floor = found[row.label], found[FLOOR_ROW]
    out: dict[str, Any] = {"implementation": row.label, "what it runs": row.runs}
    for i, column in ((0, "1 client"), (1, "8 threads")):
        rates = [r[i] for r in mine]
        ratios = [a[i] / b[i] for a, b in zip(mine, floor, strict=True)]
        out[f"{column}/s (median)"] = median(rates)
        out[f"{column}/s (range)"] = between(rates)
        out[f"{column} x floor"] = spread(ratios)
    out["errors (8 threads, all rounds)"] = sum(r[2] for r in mine)
    out["p50 / p99 ms (8 threads)"] = ""
    return out


def notes(found: Found, rounds: int, seconds: float, loads: LoadAverage, refused: int) -> list[str]:
    ours = "django-redislock take + order enqueue"

    def versus(i: int) -> str:
        pairs = zip(found[ours], found[FLOOR_ROW], strict=True)
        return spread([a[i] / b[i] for a, b in pairs])

    return [
        f"{rounds} interleaved rounds. In each, every row runs about {seconds:g} s from one "
        f"client, the rows taking turns in 50 ms slices, then about {seconds:g} s from 8 "
        f"threads of one process (kept for the whole run, with their connections), taking "
        f"turns in 100 ms slices; the rows' order rotated by one each round. Every figure is "
        f"the median of the rounds with its range; ratios to the floor are taken within a "
        f"round, median (range). The GIL caps the threads: the server is not the limit. "
        f"{loads.note()} (the shop's gunicorn workers, the server and the clients share them).",
        f"take + order enqueue (one reused Stock) vs the floor: {versus(0)} from one client, "
        f"{versus(1)} from 8 threads. It also checks the window and the buyer set, records the "
        "reservation and queues the order task in the same script, and builds the task's "
        "payload on the client. Every take row is checked: units taken = takes made.",
        "The naive rows create the order in the same transaction (so they do more than a take); "
        "errors are transactions that failed (SQLite: 'database is locked' under concurrent "
        f"writers). The shop row posts a new buyer per request; answers other than 202: "
        f"{refused} (its errors column counts the 8 threads' only).",
        "Reproduce: python3 dev.py bench seckill (it writes seckill_server first, then this "
        "table). The idiom of each row is its 'what it runs'.",
    ]


# -- at the server (redis-benchmark style) ----------------------------------------------

SERVER_CASES = (
    "floor: DECR-with-check Lua",
    "take, no order task",
    "take + order enqueue",
    "sold-out take (first sight: a whole take)",
    "sold-out take (client saw sold out: a probe)",
)


def server_stock(case: str, backend: Any) -> Stock:
    """The stock a case takes from: the same object builds the requests and sets the units.

    A take without an order task has no queue, so its keys carry the stock's own hash
    tag (an earlier version set one stock and sent its takes to another: every "take"
    was answered "no such stock").
    """
    if case == "take, no order task":
        return Stock("bench-False", queue=None, using=backend)
    item = "bench-sold-out" if case.startswith("sold-out") else "bench-True"
    return Stock(item, order_task=create_order, queue="bench-orders", using=backend)


def server_requests(case: str, backend: Any, count: int, start: int) -> list[bytes]:
    """``count`` requests of ``case`` as the app's client packs them (new buyers from ``start``).

    The take requests go through ``Stock``'s own call building (a fresh reservation id,
    the order task's payload), so the server sees what a crowd of shoppers sends.
    """
    if case.startswith("floor"):
        sha = backend.client.script_load(FLOOR)
        return [serverload.pack("EVALSHA", sha, 1, "floor:stock")] * count
    stock = server_stock(case, backend)
    sha = sha_of("stock_take")
    key = stock.keys()[0]
    if case.endswith("a probe)"):
        # what a sold-out answer leaves in a process once it is too old to refuse from memory
        sold_out.memory.entries[(id(backend), key)] = sold_out.Entry(0, 0.0, None)
    else:
        sold_out.memory.forget(backend, key)
    if stock._probing():  # the probe: one GET of the units, the same for every buyer
        return [serverload.pack("GET", stock.keys()[0])] * count
    out = []
    for i in range(start, start + count):
        call = stock._take_call(1, f"s{i}", None)
        keys = stock._script_keys(call)
        out.append(serverload.pack("EVALSHA", sha, len(keys), *keys, *call.args))
    return out


def server_usec(client: Any, request: bytes) -> float:
    """The server's µs per call of the command ``request`` sends (``INFO commandstats``).

    An ``EVALSHA``'s time includes the commands its script runs; a probe is a plain
    ``GET`` (no script runs then, so every ``GET`` counted is a probe).
    """
    name = request.split(b"\r\n")[2].decode().lower()
    stats = client.info("commandstats")[f"cmdstat_{name}"]
    return float(stats["usec"]) / int(stats["calls"])


def takes_left(case: str, backend: Any) -> int:
    """The units left of the stock ``case`` takes from."""
    return server_stock(case, backend).remaining()


def check_taken(case: str, before: int, after: int, sent: int) -> None:
    """Every take of a take case took one unit; a sold-out case took none."""
    want = 0 if case.startswith(("floor", "sold-out")) else sent
    if before - after != want:
        raise RuntimeError(f"{case}: {before - after} units taken by {sent} requests, not {want}")


def server_rows(server: Any, rounds: int, seconds: float) -> tuple[list[dict[str, Any]], list[str]]:
    """Each case's requests/s at the server, in ``rounds`` interleaved rounds (rotated).

    A round runs every case once, in an order rotated by one each round; each case sends
    about ``seconds`` worth of requests. Ratios to the floor are taken within a round.
    """
    backend = RedisQueueBackend("bench", {"LOCATION": server.url, "KEY_PREFIX": "bench"})
    client = server.client()
    client.flushall()
    client.set("floor:stock", UNITS)
    script("stock_take").load(backend.client)
    server_stock("take, no order task", backend).set(UNITS)
    server_stock("take + order enqueue", backend).set(UNITS)
    sold = server_stock(SERVER_CASES[3], backend)
    sold.set(0)
    # sizes from a short probe, so that each case runs about `seconds`
    sizes = {}
    served = 0
    for case in SERVER_CASES:
        probe, _ = serverload.run(server.url, server_requests(case, backend, 2000, served))
        served += 2000
        sizes[case] = max(2000, int(probe * seconds))
    rates: dict[str, list[float]] = {case: [] for case in SERVER_CASES}
    ratios: dict[str, list[float]] = {case: [] for case in SERVER_CASES}
    usecs: dict[str, list[float]] = {case: [] for case in SERVER_CASES}
    server_ratios: dict[str, list[float]] = {case: [] for case in SERVER_CASES}
    loads = LoadAverage()
    for n in range(rounds):
        order = rotated(SERVER_CASES, n)
        batches = {}
        for case in order:
            batches[case] = server_requests(case, backend, sizes[case], served)
            served += sizes[case]
        found, spent = {}, {}
        for case in order:
            before = takes_left(case, backend)
            client.config_resetstat()
            found[case], _ = serverload.run(server.url, batches[case])
            check_taken(case, before, takes_left(case, backend), len(batches[case]))
            spent[case] = server_usec(client, batches[case][0])
        for case in SERVER_CASES:
            rates[case].append(found[case])
            ratios[case].append(found[case] / found[SERVER_CASES[0]])
            usecs[case].append(spent[case])
            server_ratios[case].append(spent[SERVER_CASES[0]] / spent[case])
        loads.sample()
    if sold.remaining() != 0:
        raise RuntimeError("the sold-out stock sold something")
    client.flushall()
    rows: list[dict[str, Any]] = []
    for case in SERVER_CASES:
        rows.append(
            {
                "case (server, 50 clients)": case,
                "requests/s (median)": median(rates[case]),
                "requests/s (range)": f"{min(rates[case]):,.0f}-{max(rates[case]):,.0f}",
                "x floor (median)": median(ratios[case]),
                "x floor (range)": f"{min(ratios[case]):.2f}-{max(ratios[case]):.2f}",
                "server µs/call (median)": median(usecs[case]),
                "x floor by server time (median)": median(server_ratios[case]),
                "x floor by server time (range)": (
                    f"{min(server_ratios[case]):.2f}-{max(server_ratios[case]):.2f}"
                ),
            }
        )
    by = {row["case (server, 50 clients)"]: row for row in rows}
    targets = (
        ("take + order enqueue", 0.5),
        ("take, no order task", 0.7),
        ("sold-out take (client saw sold out: a probe)", 0.9),
        ("sold-out take (first sight: a whole take)", 0.9),
    )
    verdicts = [
        f"{case}: {by[case]['x floor (median)']:.2f}x the floor in requests/s, "
        f"{by[case]['x floor by server time (median)']:.2f}x in server time per call "
        f"(target >= {target}x: {'met' if by[case]['x floor (median)'] >= target else 'NOT met'})"
        for case, target in targets
    ]
    note = (
        f"At the server: {rounds} interleaved rounds (case order rotated each round), "
        f"{serverload.CLIENTS} connections with {serverload.PIPELINE} requests in flight each, "
        f"distinct buyers and request ids; ratios within a round. Server time per call: "
        f"INFO commandstats of the request's command (EVALSHA: the script with the commands "
        f"it runs; GET: a probe), reset per case. {loads.note()}. "
        f"Reproduce: python3 dev.py bench seckill."
    )
    return rows, [note, *verdicts]
