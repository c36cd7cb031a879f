"""The rate charts and a task's runs in a real browser (Debian's Chromium, Playwright).

A worker drains a queue in a few rounds (some tasks fail), so the charts show
real counts of several seconds; the screenshots go to ``test-artifacts/admin/``
(``docs/_static/admin`` holds copies).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from django_redislock import task
from django_redislock.queue.worker import Worker

from .conftest import BASE, Dashboard
from .test_browser import operator_page, pytestmark  # noqa: F401 - slow, needs Chromium


class PaymentDeclined(Exception):
    """The failure type the charts group."""


@task(queue="orders", name="shop.tasks.checkout", max_attempts=3)
def checkout(n: int) -> None:
    if n % 5 == 0:
        raise PaymentDeclined(f"card of order {n} declined")
    if n % 7 == 0:
        raise KeyError(f"sku-{n}")


def drain_in_rounds(dashboard: Dashboard) -> None:
    """Six rounds of 30 orders, each drained by an in-process worker, half a second apart."""
    orders = dashboard.queue("orders")
    for round_ in range(6):
        items = [(f"order-{round_}-{i}", checkout.payload([i], None)) for i in range(1, 31)]
        orders.enqueue_many(items)
        Worker([orders], batch=20, burst=True).run()
        time.sleep(0.5)
    # one order that failed three times, with a traceback (a queue of its own: pop takes it)
    payments = dashboard.queue("payments")
    payments.enqueue("order-1042", checkout.payload([1042], None))
    for attempt in range(3):
        (claimed,) = payments.pop(1)
        error = f"TimeoutError: payment gateway timed out (attempt {attempt + 1})\n\nTraceback..."
        payments.retry(
            claimed, delay=0, error=error, max_attempts=3, runtime=0.004 + attempt / 1000
        )


def test_charts_and_task_runs_in_a_browser(
    single: Dashboard, live_server: Any, django_user_model: Any, artifacts_dir: Path
) -> None:
    from playwright.sync_api import expect, sync_playwright

    django_user_model.objects.create_superuser("operator", "op@example.com", "s3cret-pass")
    drain_in_rounds(single)
    shots = artifacts_dir / "admin"
    shots.mkdir(exist_ok=True)
    with sync_playwright() as playwright:
        browser, page = operator_page(playwright, live_server, f"{BASE}%3Frefresh%3Doff")
        expect(page.locator(".queue-alias svg.rate-spark")).to_have_count(2)
        page.locator(".queue-alias").screenshot(path=str(shots / "overview-rates.png"))
        page.goto(f"{live_server.url}{BASE}queues/default/orders/?state=dead")
        trends = page.locator("#queue-trends")
        expect(trends.locator("svg.rate-bars")).to_have_count(10)
        expect(trends).to_contain_text("PaymentDeclined")
        trends.screenshot(path=str(shots / "queue-rates.png"))
        page.goto(f"{live_server.url}{BASE}queues/default/payments/tasks/order-1042/")
        expect(page.locator("#task-history tr")).to_have_count(3)
        expect(page.locator("#task-function")).to_have_text("shop.tasks.checkout")
        page.screenshot(path=str(shots / "task-history.png"), full_page=True)
        browser.close()
    for name in ("overview-rates", "queue-rates", "task-history"):
        assert (shots / f"{name}.png").stat().st_size > 5_000
