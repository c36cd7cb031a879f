"""The flash-sale panel: every live stock's numbers and its order queue, refreshing in place.

Stocks have no list of their own in Redis (an item's keys share the hash tag
of its order queue, and the app never scans), so the project names them:
``REDISLOCK_ADMIN_STOCKS`` is the dotted path of a callable that returns the
:class:`~django_redislock.inventory.Stock` objects worth watching (the example
shop returns the stocks of sales whose window is open or near). Each stock
costs one ``stock_stats`` script and its order queue one summary script; they
are read under the page deadline, and a stock that fails shows its error in
its own row.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.utils.module_loading import import_string

from ..exceptions import ConfigurationError
from .common import REDIS_ERRORS, duration, read, render, require, url
from .summaries import queue_summaries

if TYPE_CHECKING:
    from django.contrib.admin import ModelAdmin

STOCKS_SETTING = "REDISLOCK_ADMIN_STOCKS"
#: Most stocks the panel shows (the callable's first ones).
MAX_STOCKS = 50


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


def stock_row(stock: Any) -> dict[str, Any]:
    """One stock's numbers and its order queue's summary (two round trips)."""
    row: dict[str, Any] = {"item": stock.item, "error": "", "queue": None}
    try:
        row["stats"] = stats = stock.stats()
        row["open_for"] = (
            duration((stats.closes - stats.now).total_seconds()) if stats.closes else ""
        )
        queue = stock.queue
        if queue is not None:
            (summary,) = queue_summaries(queue.backend, [queue.name], trends=True)
            row["queue"] = summary
            row["queue_url"] = url("queue", queue.backend.alias, queue.name)
    except REDIS_ERRORS as exc:
        row["error"] = str(exc)
    return row


def read_stocks(source: Callable[[], Iterable[Any]]) -> list[dict[str, Any]]:
    stocks = list(source())[:MAX_STOCKS]
    return [stock_row(stock) for stock in stocks]


def sales_page(model_admin: ModelAdmin[Any], request: HttpRequest) -> HttpResponse:
    """Live stocks: units left, taken, restored, buyers, the window and the order queue."""
    require(request)
    source = stock_source()
    rows: list[dict[str, Any]] = []
    error = ""
    if source is None:
        error = (
            f"No stocks to show: set {STOCKS_SETTING} to the dotted path of a callable that "
            f"returns the Stock objects to watch."
        )
    else:
        try:
            rows = read(lambda: read_stocks(source))
        except REDIS_ERRORS as exc:
            error = str(exc)
    return render(
        model_admin,
        request,
        "sales.html",
        "Flash sales",
        crumbs=[("Flash sales", "")],
        live=None if error else {"sale-rows": "_sales_rows.html"},
        rows=rows,
        error=error,
    )
