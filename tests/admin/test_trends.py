"""The dashboard's rate charts: the overview's sparklines and the queue page's bar charts."""

from __future__ import annotations

import re
from collections import Counter
from html import unescape

from django.test import Client

from django_redislock.calls.batch import Batch
from django_redislock.queue.rates import add_to_pipeline

from .conftest import BASE, Dashboard, dead_task

HOSTILE = '<img src=x onerror="alert(1)">Error'


def fail_a_run(queue: object, kinds: dict[str, int]) -> None:
    """What a worker's outcome batch sends for failed runs of these exception types."""
    batch = Batch(queue.backend.client)  # type: ignore[attr-defined]
    add_to_pipeline(batch, queue, Counter(failed=sum(kinds.values())), Counter(kinds))
    batch.execute()


def test_overview_draws_each_queue_rates(dashboard: Dashboard, admin_client: Client) -> None:
    q = dashboard.queue()
    q.enqueue_many([(f"t{i}", None) for i in range(4)])
    dashboard.queue("mail").enqueue("m1", None)
    html = admin_client.get(BASE).content.decode()
    orders = html.split(">orders</a>", 1)[1].split("</tr>", 1)[0]
    assert orders.count("<svg") == 1 and "<polyline" in orders
    title = unescape(re.search(r"<title>(.*?)</title>", orders, re.S)[1])  # type: ignore[index]
    assert "enqueued: 4 in the last hour" in title and "failed: 0 in the last hour" in title
    mail = html.split(">mail</a>", 1)[1].split("</tr>", 1)[0]
    assert "enqueued: 1 in the last hour" in unescape(mail)
    # the live refresh carries the charts too
    live = admin_client.get(BASE, {"live": "1"}).json()["regions"]["queue-aliases"]
    assert "enqueued: 4 in the last hour" in unescape(live)


def test_queue_page_charts_and_failure_types(dashboard: Dashboard, admin_client: Client) -> None:
    q = dashboard.queue()
    q.enqueue_many([(f"t{i}", None) for i in range(3)])
    dead_task(q, "broken")
    fail_a_run(q, {HOSTILE: 2, "shop.errors.PaymentDeclined": 5})
    response = admin_client.get(f"{BASE}queues/default/orders/")
    html = response.content.decode()
    charts = html.split('id="queue-trends"', 1)[1]
    # a bar chart per outcome per minute and per second, each bar with its number
    assert charts.count('<svg class="rate-bars"') == 10
    assert re.search(r"<title>\d\d:\d\d UTC: 4 enqueued</title>", charts)
    assert re.search(r"<title>\d\d:\d\d:\d\d UTC: 4 enqueued</title>", charts)
    enqueued = charts.split('class="rate-enqueued"', 1)[1].split("</tr>", 1)[0]
    assert re.findall(r'class="numeric">([\d.,]+)<', enqueued)[0] == "4"
    # failures by type, most first; a hostile type name is text, never markup
    types = charts.split("Failures by exception type", 1)[1]
    assert types.index("shop.errors.PaymentDeclined") < types.index("&lt;img src=x")
    assert "<img src=x" not in html and "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in html
    live = admin_client.get(f"{BASE}queues/default/orders/", {"live": "1"}).json()["regions"]
    assert "PaymentDeclined" in live["queue-trends"]


def test_a_broken_rates_key_is_shown_not_a_500(single: Dashboard, admin_client: Client) -> None:
    q = single.queue()
    q.enqueue("a", None)
    client = single.target.raw
    client.delete(q.rates_key)
    client.set(q.rates_key, "not a hash")
    page = admin_client.get(f"{BASE}queues/default/orders/")
    assert page.status_code == 200
    assert "Cannot read this queue's rates: WRONGTYPE" in page.content.decode()
    overview = admin_client.get(BASE)
    assert overview.status_code == 200 and ">orders</a>" in overview.content.decode()
