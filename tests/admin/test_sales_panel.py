"""The flash-sale panel shows each sale's own numbers; live polls of a failed read say so.

Issue 28: every sale row repeated the shared ``orders`` queue's numbers (an
ended sale with nothing taken showed "orders in 547.6/min" and a red mark), had
no product, no takes per minute and no sold-out estimate; a stocks callable that
raised was a 500; a live poll of a page whose read failed answered the full page
with 200, and the live script stopped for good ("stopped (the server answered 200)").
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.test import Client, override_settings
from django.utils import timezone

from django_redislock.admin import sales

from ..conftest import RedisTarget
from ..servers import closed_port
from .conftest import BASE

PANEL = BASE + "flash-sales/"


@pytest.fixture
def shop_on(single_target: RedisTarget) -> Iterator[RedisTarget]:
    params = {**single_target.params(), "KEY_PREFIX": "panel"}
    with override_settings(
        REDISLOCK_LOCKS={"default": params},
        REDISLOCK_QUEUES={"default": params},
        REDISLOCK_ADMIN_STOCKS="shop.panel.live_stocks",
    ):
        yield single_target


def open_sale(name: str, units: int, **kwargs: Any) -> Any:
    from shop.models import Product
    from shop.services import open_sale

    product = Product.objects.create(name=name, price=Decimal("10.00"))
    return open_sale(product, units, **kwargs)


def row_of(html: str, label: str) -> str:
    rows = html.split('id="sale-rows">', 1)[1].split("</tbody>", 1)[0]
    (row,) = [r for r in rows.split("</tr>") if label in r]
    return row


def test_each_sale_shows_its_own_numbers(shop_on: RedisTarget, admin_client: Client) -> None:
    now = timezone.now()
    busy = open_sale(
        "Busy phone", 100, opens=now - timedelta(minutes=3), closes=now + timedelta(minutes=30)
    )
    for i in range(30):
        assert busy.stock.take(buyer=f"b{i}", data={"sale": busy.pk}).ok
    ended = open_sale("Old lamp", 5, opens=now - timedelta(minutes=20), closes=now)
    html = admin_client.get(PANEL).content.decode()
    busy_row, ended_row = row_of(html, "Busy phone"), row_of(html, "Old lamp")
    assert busy.stock.item in busy_row and ended.stock.item in ended_row
    # the ended sale: nothing taken, no rate, no estimate, no red mark, no order numbers
    assert ">ended<" in ended_row and "trouble" not in ended_row
    assert "orders in" not in ended_row and "rate-spark" not in ended_row
    ended_cells = re.findall(r'<td class="numeric">(?:<strong>)?([\d,.—]+)', ended_row)
    assert ended_cells[:5] == ["5", "0", "0", "0", "—"]  # left, taken, restored, buyers, takes/min
    # the busy sale: its own takes per minute (mean since it opened) and when it runs out
    busy_cells = re.findall(r'<td class="numeric">(?:<strong>)?([\d,.]+)', busy_row)
    assert busy_cells[:4] == ["70", "30", "0", "30"]
    assert float(busy_cells[4].replace(",", "")) > 0 and "since opening" in busy_row
    assert "in about" in busy_row or "not before it closes" in busy_row
    # the shared order queue, once
    queues = html.split('id="sale-queues">', 1)[1].split("</tbody>", 1)[0]
    assert queues.count(">orders</a>") == 1
    assert re.findall(r'<td class="numeric">(\d+)', queues)[:2] == ["2", "30"]
    assert "not counted" not in html  # sold out is counted now (below)


def test_the_take_rate_is_the_last_minute_of_readings() -> None:
    item = "rate-test-item"
    sales._samples.pop(item, None)
    assert sales.take_rate(item, 1000.0, 10) is None  # one reading: no rate yet
    assert sales.take_rate(item, 1030.0, 40) == pytest.approx(60.0)  # 30 units in 30 s
    assert sales.take_rate(item, 1070.0, 60) == pytest.approx(30.0)  # since 1030 (1000 expired)
    assert sales.take_rate(item, 1080.0, 0) is None  # set again: the counter restarted
    assert len(sales._samples[item]) == 1


def test_a_sale_never_borrows_an_earlier_sales_readings(
    shop_on: RedisTarget, admin_client: Client
) -> None:
    """CI (Python 3.10): an earlier test's sale of the same item name left readings.

    The readings were keyed by the item alone, so a new sale under a reused
    name showed a "last minute" rate made of another sale's counter.
    """
    now = timezone.now()
    sale = open_sale(
        "Reused", 50, opens=now - timedelta(minutes=2), closes=now + timedelta(hours=1)
    )
    for i in range(10):
        assert sale.stock.take(buyer=f"b{i}", data={"sale": sale.pk}).ok
    # an earlier sale of this item name, read by this process a minute ago
    sales.take_rate(sale.stock.item, now.timestamp() - 30, 2)
    html = admin_client.get(PANEL).content.decode()
    row = row_of(html, "Reused")
    assert "since opening" in row and "last minute" not in row


def raising() -> list[Any]:
    raise RuntimeError("the sales table is gone")


def not_stocks() -> list[Any]:
    return ["sale-1", 42]


@pytest.mark.parametrize(
    ("path", "said"),
    [
        ("tests.admin.test_sales_panel.raising", "raised RuntimeError: the sales table is gone"),
        ("tests.admin.test_sales_panel.not_stocks", "not a Stock or a (label, Stock) pair: str"),
    ],
)
def test_a_broken_stocks_callable_is_shown_not_a_500(
    shop_on: RedisTarget, admin_client: Client, path: str, said: str
) -> None:
    with override_settings(REDISLOCK_ADMIN_STOCKS=path):
        response = admin_client.get(PANEL)
    assert response.status_code == 200
    assert said in response.content.decode()


def test_a_live_poll_of_a_failed_read_says_so(admin_client: Client) -> None:
    params = {"LOCATION": f"redis://127.0.0.1:{closed_port()}/0", "KEY_PREFIX": "adm"}
    with override_settings(
        REDISLOCK_LOCKS={"default": params},
        REDISLOCK_QUEUES={"default": params},
        REDISLOCK_ADMIN_STOCKS="shop.panel.live_stocks",
    ):
        from shop.models import Product, Sale

        product = Product.objects.create(name="Any", price=Decimal("1.00"))
        Sale.objects.create(product=product, units=3, closes=timezone.now() + timedelta(hours=1))
        for page in (
            BASE + "queues/default/orders/",
            BASE + "locks/",
            BASE + "queues/default/orders/tasks/t1/",
        ):
            poll = admin_client.get(page, {"live": "1"})
            assert poll.status_code == 503, page
            assert poll["Content-Type"].startswith("application/json"), page
            assert "unreachable" in poll.json()["error"], page  # shown; the tables stay
        # the panel reads each stock on its own: its rows carry the error
        rows = admin_client.get(PANEL, {"live": "1"}).json()["regions"]["sale-rows"]
        assert "unreachable" in rows and 'class="trouble"' in rows


def test_a_sharded_sale_shows_its_buckets_and_their_order_queues(
    shop_on: RedisTarget, admin_client: Client
) -> None:
    """Issue 27 item 5: a stock split over buckets showed only its totals and queue 0."""
    now = timezone.now()
    sale = open_sale("Split phone", 7, opens=now - timedelta(minutes=1), shards=3)
    buyers = [f"b{i}" for i in range(5)]
    for buyer in buyers:
        assert sale.stock.take(buyer=buyer, data={"sale": sale.pk}).ok
    parts = sale.stock.bucket_stats()
    assert [part.remaining + part.taken for part in parts] == [3, 2, 2]
    plain = open_sale("Whole lamp", 4, opens=now - timedelta(minutes=1))
    html = admin_client.get(PANEL).content.decode()
    rows = html.split('id="sale-rows">', 1)[1].split("</tbody>", 1)[0]
    total = row_of(html, "Split phone")
    assert re.findall(r'<td class="numeric">(?:<strong>)?([\d,.]+)', total)[:2] == ["2", "5"]
    lines = [r for r in rows.split("</tr>") if 'class="bucket"' in r]
    assert len(lines) == 3  # the plain sale has none: it looks as before
    for index, (line, part) in enumerate(zip(lines, parts, strict=True)):
        assert f"bucket {index} of 3" in line
        cells = re.findall(r'<td class="numeric">([\d,]+)', line)
        assert cells[:2] == [str(part.remaining), str(part.taken)]
        assert sale.stock.order_queues()[index] in line
    assert sale.stock.order_queues() == ["orders", "orders.s1", "orders.s2"]
    # every bucket's order queue in the queue table, each once, with what it holds
    queues = html.split('id="sale-queues">', 1)[1].split("</tbody>", 1)[0]
    for name in sale.stock.order_queues():
        assert queues.count(f">{name}</a>") == 1
    ready = {}
    for line in queues.split("</tr>"):
        named = re.search(r">([\w.]+)</a>", line)
        if named:
            ready[named.group(1)] = re.findall(r'<td class="numeric">(\d+)', line)[1]
    assert ready == {
        name: str(part.taken) for name, part in zip(sale.stock.order_queues(), parts, strict=True)
    }
    assert "bucket" not in row_of(html, "Whole lamp") and plain.stock.shards() == 1


def test_a_sharded_sale_shows_each_buckets_rate_refusals_and_estimate(
    shop_on: RedisTarget, admin_client: Client
) -> None:
    """Issue 27 item 5: per bucket, takes/min, the refusals counted in Redis (already bought,
    not open, ended, not admitted) and a sold-out estimate; sold-out refusals are counted by
    the process and shown once flushed (test_sold_out_refusals_are_shown_once_flushed)."""
    from django_redislock.inventory import TakeResult, sold_out
    from django_redislock.inventory.shards import home_bucket

    now = timezone.now()
    sale = open_sale("Counted phone", 3, opens=now - timedelta(minutes=2), shards=3)
    stock = sale.stock
    homes: dict[int, str] = {}  # one buyer homed in each bucket
    for n in range(200):
        homes.setdefault(home_bucket(f"c{n}", 3), f"c{n}")
    assert stock.take(buyer=homes[1], data={"sale": sale.pk}).ok
    # bucket 1's buyer again: its bucket (1 unit) answers sold out, then the claim there
    # finds the buyer: a duplicate, counted in bucket 1
    assert stock.take(buyer=homes[1]).result is TakeResult.ALREADY_BOUGHT
    for buyer in (homes[0], homes[2]):
        assert stock.take(buyer=buyer, data={"sale": sale.pk}).ok
    sold_out.memory.clear()
    assert stock.take(buyer="late-1").result is TakeResult.SOLD_OUT  # counted, not flushed
    parts = stock.bucket_stats()
    assert [part.refused["duplicate"] for part in parts] == [0, 1, 0]
    assert stock.stats().refused == {
        "duplicate": 1,
        "not_open": 0,
        "ended": 0,
        "admission": 0,
        "sold_out_redis": 0,
        "sold_out_local": 0,
    }
    later = open_sale("Later lamp", 2, opens=now + timedelta(hours=1))
    assert later.stock.take(buyer="early").result is TakeResult.NOT_OPEN

    html = admin_client.get(PANEL).content.decode()
    rows = html.split('id="sale-rows">', 1)[1].split("</tbody>", 1)[0]
    total = row_of(html, "Counted phone")
    assert "already bought 1" in total and "sold out" not in total.split("refusals")[1]
    lines = [r for r in rows.split("</tr>") if 'class="bucket"' in r]
    assert len(lines) == 3
    for index, line in enumerate(lines):
        refused = line.split('class="refusals">', 1)[1].split("</td>", 1)[0]
        want = "already bought 1" if index == 1 else '<span class="muted">none</span>'
        assert refused == want
        # its own takes/min (the mean since it opened: 1 unit in about 2 minutes)
        rate = re.findall(r'<td class="numeric">([\d.]+)<br><span class="muted">since', line)
        assert len(rate) == 1 and 0 < float(rate[0]) < 1
        assert "<td>sold out</td>" in line  # its estimate: every bucket is sold out
    assert "not open 1" in row_of(html, "Later lamp")
    assert "not counted" not in html


def test_sold_out_refusals_are_shown_once_flushed(
    shop_on: RedisTarget, admin_client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 27 item 5: refusals "sold out locally, sold out in Redis" per bucket and in the
    total; the panel said "sold out not counted"."""
    from django_redislock.inventory import TakeResult, sold_out
    from django_redislock.inventory.shards import home_bucket
    from django_redislock.inventory.sold_out_counts import counts

    monkeypatch.setattr(sold_out, "UNTRACKED_AGE", 3600.0)  # local answers, whatever the load
    now = timezone.now()
    sale = open_sale("Gone phone", 2, opens=now - timedelta(minutes=2), shards=2)
    stock = sale.stock
    homes: dict[int, str] = {}
    for n in range(200):
        homes.setdefault(home_bucket(f"g{n}", 2), f"g{n}")
    for buyer in ("x1", "x2"):
        assert stock.take(buyer=buyer, data={"sale": sale.pk}).ok
    sold_out.memory.clear()
    assert stock.take(buyer=homes[1]).result is TakeResult.SOLD_OUT  # Redis, bucket 1
    for _ in range(1234):
        assert stock.take(buyer=homes[0]).result is TakeResult.SOLD_OUT  # local, bucket 0
    html = admin_client.get(PANEL).content.decode()
    assert "sold out" not in row_of(html, "Gone phone").split('class="refusals">', 1)[1]
    assert counts.flush()
    html = admin_client.get(PANEL).content.decode()
    total = row_of(html, "Gone phone").split('class="refusals">', 1)[1].split("</td>", 1)[0]
    assert total == (
        'sold out 1,235 <span class="muted">(counted within 5 s: 1,234 local, 1 in Redis)</span>'
    )
    rows = html.split('id="sale-rows">', 1)[1].split("</tbody>", 1)[0]
    lines = [r for r in rows.split("</tr>") if 'class="bucket"' in r]
    refused = [line.split('class="refusals">', 1)[1].split("</td>", 1)[0] for line in lines]
    assert refused == [
        'sold out 1,234 <span class="muted">(counted within 5 s: 1,234 local, 0 in Redis)</span>',
        'sold out 1 <span class="muted">(counted within 5 s: 0 local, 1 in Redis)</span>',
    ]
    assert "adds its counts every 5 s" in html and "not counted" not in html


CALLED_IN: list[int] = []


def thread_noting_stocks() -> Any:
    """The shop's stocks callable, noting the thread it runs in (its query uses that
    thread's database connection)."""
    import threading

    from shop.panel import live_stocks

    CALLED_IN.append(threading.get_ident())
    return live_stocks()


def test_the_stocks_callable_runs_in_the_requests_thread(
    shop_on: RedisTarget, admin_client: Client
) -> None:
    """Issue 28: the panel ran the project's stocks callable (a database query) in its
    Redis deadline thread, opening a database connection outside the request on every
    poll; it runs in the request's thread, and only the Redis reads have the deadline."""
    import threading

    open_sale("Lamp", 5)
    CALLED_IN.clear()
    with override_settings(
        REDISLOCK_ADMIN_STOCKS="tests.admin.test_sales_panel.thread_noting_stocks"
    ):
        for query in ({}, {"live": "1"}):
            assert admin_client.get(PANEL, query).status_code == 200
    assert [threading.get_ident()] * 2 == CALLED_IN
