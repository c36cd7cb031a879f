"""The flash-sale panel: each sale's own numbers, and its order queues once, refreshing in place.

Stocks have no list of their own in Redis (an item's keys share the hash tag
of its order queue, and the app never scans), so the project names them:
``REDISLOCK_ADMIN_STOCKS`` is the dotted path of a callable that returns the
:class:`~django_redislock.inventory.Stock` objects worth watching, or
``(label, Stock)`` pairs (the example shop labels each with its product).

The callable runs in the request's own thread (it usually queries the
database, whose connection belongs to that thread), and whatever it raises or
returns that is not a stock is shown on the page, never a 500. Then every
stock costs one ``stock_stats`` script and each distinct order queue one
summary script, all read within the request's deadline. A stock split over
buckets (``set(units, shards=N)``) costs one ``stock_stats`` per bucket: its row
shows the totals, a line per bucket under it (units left, taken, restored,
buyers, order queue), and the queue table lists every bucket's order queue.
A row shows only its
own stock's numbers: several sales usually share one order queue, whose
numbers are shown once under the table, not repeated on every sale.

Takes per minute come from the ``taken`` counter the take script keeps: the
difference between two readings of this process (the live refresh reads
every few seconds) over the last minute, else the mean since the sale
opened; a sharded stock's buckets get their own rate and estimate. Refusals
come from the counters the take script keeps in each bucket's meta hash (already
bought, not open, ended, not admitted) and from the sold-out counts each process
keeps and adds to the same hash every few seconds (answered by Redis, answered from
the local flag: :mod:`~django_redislock.inventory.sold_out_counts`), shown as one
"sold out" figure with its two parts and how late it may be (docs/admin.md).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.utils.module_loading import import_string

from ..exceptions import ConfigurationError
from ..inventory import Stock, sold_out_counts
from ..inventory.shards import bucket_queue, total_stats
from .common import REDIS_ERRORS, duration, read, render, require, url
from .summaries import queue_summaries

if TYPE_CHECKING:
    from django.contrib.admin import ModelAdmin

STOCKS_SETTING = "REDISLOCK_ADMIN_STOCKS"
#: Most stocks the panel shows (the callable's first ones).
MAX_STOCKS = 50
#: Seconds of ``taken`` readings kept per stock for its recent take rate.
RATE_WINDOW = 60.0
#: Readings kept per stock (bounded whatever the polling rate).
MAX_SAMPLES = 64
#: Stocks whose readings are kept (the oldest are forgotten first).
MAX_SAMPLED = 1000

_samples: dict[str, deque[tuple[float, int]]] = {}
_samples_lock = threading.Lock()


def stock_source() -> Callable[[], Iterable[Any]] | None:
    """The configured callable, or None when the panel is not set up."""
    path = getattr(settings, STOCKS_SETTING, None)
    if not path:
        return None
    if not isinstance(path, str):
        raise ConfigurationError(f"{STOCKS_SETTING} must be a dotted path, got {path!r}")
    try:
        found = import_string(path)
    except ImportError as exc:
        raise ConfigurationError(f"{STOCKS_SETTING} = {path!r} cannot be imported: {exc}") from exc
    if not callable(found):
        raise ConfigurationError(f"{STOCKS_SETTING} = {path!r} is not callable")
    return found  # type: ignore[no-any-return]


def take_rate(item: str, now: float, taken: int) -> float | None:
    """Units taken per minute over up to the last minute of this process's readings.

    ``item`` names one sale: the stock's key and its opening time, so a sale
    set again under the same name (or another alias's stock of that name)
    never borrows an earlier sale's readings. ``now`` is the server's time in
    seconds. None until two readings at least a second apart exist (the
    caller then falls back to the mean since opening).
    """
    with _samples_lock:
        seen = _samples.get(item)
        if seen is None:
            if len(_samples) >= MAX_SAMPLED:
                _samples.pop(next(iter(_samples)))
            seen = _samples[item] = deque(maxlen=MAX_SAMPLES)
        if seen and (taken < seen[-1][1] or now < seen[-1][0]):
            seen.clear()  # the stock was set again: its counter restarted
        while seen and now - seen[0][0] > RATE_WINDOW:
            seen.popleft()
        first = seen[0] if seen else None
        if not seen or now - seen[-1][0] >= 1.0:
            seen.append((now, taken))
    if first is None or now - first[0] < 1.0:
        return None
    return (taken - first[1]) * 60.0 / (now - first[0])


def sale_numbers(stats: Any, sale: str = "") -> dict[str, Any]:
    """Takes per minute (recent, else since opening) and when the stock runs out at that pace.

    ``sale`` tells this stock's readings apart from other stocks' (its key).
    """
    now = stats.now.timestamp()
    opens = stats.opens.timestamp() if stats.opens is not None else ""
    rate = take_rate(f"{sale or stats.item}@{opens}", now, stats.taken)
    basis = "last minute"
    if rate is None and stats.opens is not None and stats.taken:
        end = min(now, stats.closes.timestamp()) if stats.closes else now
        open_for = end - stats.opens.timestamp()
        rate = stats.taken * 60.0 / open_for if open_for >= 1 else None
        basis = "since opening"
    state = stats.state
    if state == "sold_out":
        estimate = "sold out"
    elif state != "open":
        estimate = "—"
    elif not rate:
        estimate = "no takes"
    else:
        left = stats.remaining * 60.0 / rate
        closes_in = (stats.closes - stats.now).total_seconds() if stats.closes else None
        if closes_in is not None and closes_in < left:
            estimate = (
                f"not before it closes ({stats.remaining - int(rate * closes_in / 60):,} left)"
            )
        else:
            estimate = f"in about {duration(left)}"
    return {"rate": rate, "rate_basis": basis if rate is not None else "", "sold_out_in": estimate}


#: The refusal counters of ``StockStats.refused``, as the panel names them.
REFUSAL_LABELS = {
    "duplicate": "already bought",
    "not_open": "not open",
    "ended": "ended",
    "admission": "not admitted",
}


def refusals(stats: Any) -> list[tuple[str, int, str]]:
    """The non-zero refusal counters of a stock or bucket: (label, count, note), in a fixed
    order; sold out last, the sum of its two counters, its note their split and lateness."""
    found = [
        (label, stats.refused[key], "")
        for key, label in REFUSAL_LABELS.items()
        if stats.refused.get(key)
    ]
    local, redis = stats.refused.get("sold_out_local", 0), stats.refused.get("sold_out_redis", 0)
    if local or redis:
        every = f"{sold_out_counts.EVERY:g}"
        note = f"counted within {every} s: {local:,} local, {redis:,} in Redis"
        found.append(("sold out", local + redis, note))
    return found


def as_stock(entry: Any) -> tuple[str, Stock]:
    """``(label, stock)`` from one of the callable's entries; ValueError for anything else."""
    if isinstance(entry, Stock):
        return "", entry
    if isinstance(entry, tuple) and len(entry) == 2 and isinstance(entry[1], Stock):
        return str(entry[0]), entry[1]
    raise ValueError(f"not a Stock or a (label, Stock) pair: {type(entry).__name__}")


def listed_stocks(source: Callable[[], Iterable[Any]]) -> tuple[list[tuple[str, Stock]], str]:
    """The callable's first stocks, and what went wrong with it ("" when nothing did).

    Run in the request's thread. A callable that raises, returns something that is
    not iterable, or lists something that is not a stock is the project's bug: the
    page names it instead of answering 500.
    """
    path = getattr(settings, STOCKS_SETTING, "")
    try:
        entries = list(source())
    except Exception as exc:  # the project's code: whatever it raises is shown
        return [], f"{STOCKS_SETTING} = {path!r} raised {type(exc).__name__}: {exc}"
    stocks = []
    for entry in entries[:MAX_STOCKS]:
        try:
            stocks.append(as_stock(entry))
        except ValueError as exc:
            return [], f"{STOCKS_SETTING} = {path!r} returned an entry that is {exc}"
    return stocks, ""


def stock_row(label: str, stock: Stock) -> dict[str, Any]:
    """One stock's own numbers (one round trip per bucket), and its buckets' when sharded."""
    row: dict[str, Any] = {"item": stock.item, "label": label, "error": "", "buckets": []}
    try:
        parts = stock.bucket_stats()
        row["stats"] = stats = parts[0] if len(parts) == 1 else total_stats(stock.item, parts)
        if len(parts) > 1:
            row["buckets"] = [
                {
                    "index": index,
                    "stats": part,
                    "queue": queue,
                    "refusals": refusals(part),
                    **sale_numbers(part, stock.bucket(index).keys()[0]),
                }
                for index, (part, queue) in enumerate(
                    zip(parts, bucket_queues(stock, len(parts)), strict=True)
                )
            ]
        row["open_for"] = (
            duration((stats.closes - stats.now).total_seconds()) if stats.closes else ""
        )
        # a sharded stock's totals keep readings apart from its bucket 0's (the same key)
        sale = stock.keys()[0] + ("" if len(parts) == 1 else "#total")
        row.update(sale_numbers(stats, sale))
        row["refusals"] = refusals(stats)
        queue = stock.queue
        row["queue"] = (queue.backend.alias, queue.name) if queue is not None else None
    except REDIS_ERRORS as exc:
        row["error"] = str(exc)
    return row


def bucket_queues(stock: Stock, shards: int) -> list[str]:
    """The order queue name of each of ``stock``'s ``shards`` buckets ("" without an order task)."""
    name = stock.queue_name
    return ["" if name is None else bucket_queue(name, index) for index in range(shards)]


def order_queues(stock: Stock) -> list[Any]:
    """The order queues of every bucket of ``stock`` (the stock's own first; none without)."""
    if stock.queue_name is None:
        return []
    found = [stock.bucket(index).queue for index in range(stock.shards())]
    return [queue for queue in found if queue is not None]


def queue_rows(stocks: list[tuple[str, Stock]]) -> list[dict[str, Any]]:
    """The order queues of ``stocks`` (every bucket's), each once, with the sales that feed it."""
    by_queue: dict[tuple[str, str], dict[str, Any]] = {}
    for _, stock in stocks:
        try:
            queues = order_queues(stock)
        except ConfigurationError:
            continue
        except REDIS_ERRORS:
            continue
        for queue in queues:
            key = (queue.backend.alias, queue.name)
            entry = by_queue.setdefault(key, {"queue": queue, "sales": 0})
            entry["sales"] += 1
    rows = []
    for (alias, name), entry in by_queue.items():
        row: dict[str, Any] = {"alias": alias, "name": name, "sales": entry["sales"], "error": ""}
        row["url"] = url("queue", alias, name)
        try:
            (row["summary"],) = queue_summaries(entry["queue"].backend, [name], trends=True)
        except REDIS_ERRORS as exc:
            row["error"] = str(exc)
        rows.append(row)
    return rows


def read_stocks(stocks: list[tuple[str, Stock]]) -> tuple[list[dict[str, Any]], list[Any]]:
    return [stock_row(label, stock) for label, stock in stocks], queue_rows(stocks)


def sales_page(model_admin: ModelAdmin[Any], request: HttpRequest) -> HttpResponse:
    """Each sale: units left, taken, takes/min, when it sells out; then its order queues."""
    require(request)
    source = stock_source()
    rows: list[dict[str, Any]] = []
    queues: list[Any] = []
    error = ""
    if source is None:
        error = (
            f"No stocks to show: set {STOCKS_SETTING} to the dotted path of a callable that "
            f"returns the Stock objects to watch."
        )
    else:
        stocks, error = listed_stocks(source)
        if not error:
            try:
                rows, queues = read(lambda: read_stocks(stocks), key="admin-sales")
            except REDIS_ERRORS as exc:
                error = str(exc)
    return render(
        model_admin,
        request,
        "sales.html",
        "Flash sales",
        crumbs=[("Flash sales", "")],
        live=None
        if error
        else {"sale-rows": "_sales_rows.html", "sale-queues": "_sales_queues.html"},
        rows=rows,
        queues=queues,
        error=error,
        count_every=f"{sold_out_counts.EVERY:g}",
    )
