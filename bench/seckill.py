"""Seckill benchmark: takes per second, beside the floor and beside a naive database.

Rows, on one private server in one run:

* raw DECR-with-check Lua script: the floor, one key, no buyer check, no order;
* ``Stock.take`` without an order task (window, buyer set, units, reservation);
* ``Stock.take`` with the order task queued in the same script (what the shop does);
* a naive database implementation: ``select_for_update()`` on the stock row, a
  duplicate-buyer query, the decrement and the order insert in one transaction, on
  SQLite and on PostgreSQL (a bench-only pair of tables, created and dropped);
* the example shop end to end: buy requests/s over HTTP under gunicorn with 4 workers.

Each is measured from one client and from 8 threads of one process.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from django.db import connections, models, transaction

from bench import serverload
from bench.common import median, rate, save, table
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

    class Meta:
        app_label = "testapp"
        db_table = "bench_seckill_stock"

    def __str__(self) -> str:
        return f"{self.units} units"


class NaiveOrder(models.Model):
    stock = models.ForeignKey(NaiveStock, on_delete=models.CASCADE)
    buyer = models.CharField(max_length=64)

    class Meta:
        app_label = "testapp"
        db_table = "bench_seckill_order"
        unique_together = [("stock", "buyer")]

    def __str__(self) -> str:
        return self.buyer


def threaded(fn: Callable[[], Any], threads: int, seconds: float) -> tuple[float, int]:
    """Calls per second of ``fn`` from ``threads`` threads, and how many raised."""
    counts = [0] * threads
    errors = [0] * threads
    deadline = time.perf_counter() + seconds

    def loop(i: int) -> None:
        try:
            while time.perf_counter() < deadline and counts[i] < 1_000_000:
                try:
                    fn()
                except Exception:
                    errors[i] += 1
                counts[i] += 1
        finally:
            connections.close_all()

    workers = [threading.Thread(target=loop, args=(i,)) for i in range(threads)]
    start = time.perf_counter()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(seconds + 60)
    return sum(counts) / (time.perf_counter() - start), sum(errors)


def buyers() -> Callable[[], str]:
    counter = itertools.count()
    return lambda: f"b{next(counter)}"


def taker(stock: Stock) -> Callable[[], Any]:
    """A take for a new buyer per call."""
    next_buyer = buyers()
    return lambda: stock.take(buyer=next_buyer())


def measure(name: str, fn: Callable[[], Any], seconds: float) -> dict[str, Any]:
    one = rate(fn, seconds=seconds)
    eight, errors = threaded(fn, 8, seconds)
    row: dict[str, Any] = {"implementation": name, "1 client/s": one, "8 threads/s": eight}
    row["errors (8 threads)"] = errors
    return row


# -- Redis rows ------------------------------------------------------------------------


def redis_rows(server: Any, seconds: float) -> list[dict[str, Any]]:
    backend = RedisQueueBackend("bench", {"LOCATION": server.url, "KEY_PREFIX": "bench"})
    client = server.client()
    rows = []
    client.flushall()
    client.set("floor:stock", UNITS)
    floor = backend.client.register_script(FLOOR)
    rows.append(
        measure("raw DECR-with-check Lua (floor)", lambda: floor(keys=["floor:stock"]), seconds)
    )
    for label, order_task in (
        ("take, no order task", None),
        ("take + order enqueue", create_order),
    ):
        client.flushall()
        stock = Stock("bench-item", order_task=order_task, queue="bench-orders", using=backend)
        stock.set(UNITS)
        rows.append(measure(f"django-redislock {label}", taker(stock), seconds))
    client.flushall()
    return rows


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


def database_row(alias: str, label: str, params: dict[str, Any], seconds: float) -> dict[str, Any]:
    add_database(alias, params)
    connection = connections[alias]
    try:
        with connection.schema_editor() as editor:
            editor.create_model(NaiveStock)
            editor.create_model(NaiveOrder)
    except Exception as exc:
        return {"implementation": label, "1 client/s": f"skipped ({type(exc).__name__})"}
    try:
        NaiveStock.objects.using(alias).create(pk=1, units=UNITS)
        return measure(label, lambda: naive_take(alias, next_buyer), seconds)
    finally:
        connections.close_all()
        with connections[alias].schema_editor() as editor:
            editor.delete_model(NaiveOrder)
            editor.delete_model(NaiveStock)
        connections[alias].close()


next_buyer = buyers()


def database_rows(seconds: float, tmp: Path) -> list[dict[str, Any]]:
    sqlite = {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": str(tmp / "naive.sqlite3"),
        "OPTIONS": {"timeout": 20},
    }
    return [
        database_row("bench_sqlite", "naive select_for_update, SQLite", sqlite, seconds),
        database_row("bench_pg", "naive select_for_update, PostgreSQL", PG, seconds),
    ]


# -- end to end --------------------------------------------------------------------------


def shop_row(server: Any, requests: int, tmp: Path) -> dict[str, Any]:
    """Buy requests/s through the example shop under gunicorn (4 workers)."""
    sys.path.insert(0, str(ROOT / "example_project"))
    from shop.server import running
    from shop.swarm import Swarm, percentile

    env = {
        "SHOP_DATA_DIR": str(tmp / "shop"),
        "SHOP_REDIS_URL": server.url,
        "DJANGO_SETTINGS_MODULE": "shopsite.settings",
    }
    (tmp / "shop").mkdir()
    sale_id = open_shop_sale(env)
    label = "example shop over HTTP (gunicorn, 4 workers)"
    rows = {}
    with running(4, env) as port:
        for threads in (1, 8):
            swarm = Swarm(port, sale_id, concurrency=threads)
            swarm.fetch_csrf()
            swarm.warm_up(32)
            start = time.perf_counter()
            answers = swarm.run([f"h{threads}-{i}" for i in range(requests)])
            elapsed = time.perf_counter() - start
            good = sum(1 for answer in answers if answer.status == 202)
            latencies = [answer.seconds * 1000 for answer in answers]
            rows[threads] = (
                requests / elapsed,
                requests - good,
                percentile(latencies, 50),
                percentile(latencies, 99),
            )
    return {
        "implementation": label,
        "1 client/s": rows[1][0],
        "8 threads/s": rows[8][0],
        "errors (8 threads)": rows[8][1],
        "p50 / p99 ms (8 threads)": f"{rows[8][2]:.1f} / {rows[8][3]:.1f}",
    }


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


COLUMNS = [
    "implementation",
    "1 client/s",
    "8 threads/s",
    "errors (8 threads)",
    "p50 / p99 ms (8 threads)",
]


def run(server: Any, quick: bool) -> dict[str, Any]:
    seconds, requests = (0.5, 300) if quick else (3.0, 3000)
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
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        rows = redis_rows(server, seconds)
        rows += database_rows(seconds, tmp)
        rows.append(shop_row(server, requests, tmp))
    return {
        "name": "seckill",
        "columns": COLUMNS,
        "rows": rows,
        "notes": notes(rows, seconds, requests),
    }


def notes(rows: list[dict[str, Any]], seconds: float, requests: int) -> list[str]:
    by = {row["implementation"]: row for row in rows}
    floor = by["raw DECR-with-check Lua (floor)"]["1 client/s"]
    ours = by["django-redislock take + order enqueue"]["1 client/s"]
    return [
        f"Each Redis and database row runs {seconds:g}s from one client, then {seconds:g}s from 8 "
        f"threads of one process (the GIL caps threads; the server is not the limit). The shop "
        f"row sends {requests} buy requests from 1 and from 8 client threads.",
        f"take + order enqueue runs at {ours / floor:.0%} of the floor from one client: it also "
        "checks the window and the buyer set, records the reservation and queues the order task "
        "in the same script.",
        "The naive rows create the order in the same transaction (so they do more than a take); "
        "errors are transactions that failed (SQLite: 'database is locked' under concurrent "
        "writers).",
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
    loads = [os.getloadavg()[0]]
    for n in range(rounds):
        order = SERVER_CASES[n % len(SERVER_CASES) :] + SERVER_CASES[: n % len(SERVER_CASES)]
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
        loads.append(os.getloadavg()[0])
    if sold.remaining() != 0:
        raise RuntimeError("the sold-out stock sold something")
    client.flushall()
    rows = []
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
        f"it runs; GET: a probe), reset per case. "
        f"1-minute load average "
        f"{min(loads):.1f}-{max(loads):.1f}. Reproduce: python3 dev.py bench seckill."
    )
    return rows, [note, *verdicts]
