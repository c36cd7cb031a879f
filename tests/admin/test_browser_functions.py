"""The task functions table, the day and week charts and the runs searched by function in a
real browser (Debian's Chromium, Playwright); the screenshots go to ``test-artifacts/admin/``
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


class CardDeclined(Exception):
    """The failure the runs page is searched for."""


@task(queue="orders", name="shop.tasks.pay", max_attempts=1)
def pay(n: int) -> None:
    time.sleep(0.002 * (n % 6))
    if n % 9 == 0:
        raise CardDeclined(f"card of order {n} declined")


@task(queue="orders", name="shop.tasks.send_receipt")
def send_receipt(n: int) -> None:
    """Fast, never fails."""


def drain_in_rounds(dashboard: Dashboard) -> None:
    orders = dashboard.queue("orders")
    for round_ in range(4):
        items = [(f"pay-{round_}-{i}", pay.payload([i], None)) for i in range(1, 31)]
        items += [(f"mail-{round_}-{i}", send_receipt.payload([i], None)) for i in range(20)]
        orders.enqueue_many(items)
        Worker([orders], batch=20, burst=True).run()


def test_functions_week_and_runs_in_a_browser(
    single: Dashboard, live_server: Any, django_user_model: Any, artifacts_dir: Path
) -> None:
    from playwright.sync_api import expect, sync_playwright

    django_user_model.objects.create_superuser("operator", "op@example.com", "s3cret-pass")
    drain_in_rounds(single)
    shots = artifacts_dir / "admin"
    shots.mkdir(exist_ok=True)
    with sync_playwright() as playwright:
        browser, page = operator_page(playwright, live_server, f"{BASE}queues/default/orders/")
        functions = page.locator("table.task-functions")
        expect(functions.locator("tr.function")).to_have_count(2)
        expect(functions).to_contain_text("shop.tasks.send_receipt")
        functions.screenshot(path=str(shots / "queue-functions.png"))
        week = page.locator("table.rates-long")
        expect(week.locator("svg.rate-bars-long")).to_have_count(10)
        week.screenshot(path=str(shots / "queue-week.png"))
        page.click("#recent-runs")
        # the run log: every end of a run, newest first, successes and failures alike
        expect(page.locator("#run-rows")).to_contain_text("200 of 200 runs match")
        expect(page.locator("#run-rows")).to_contain_text("succeeded")
        expect(page.locator("#run-rows")).to_contain_text("CardDeclined")
        # the sidebar folded, so the newest round's receipts and payments (one declined) fit
        page.click("#toggle-nav-sidebar")
        clip: Any = {"x": 0, "y": 0, "width": 1280, "height": 1450}
        page.screenshot(path=str(shots / "runs.png"), full_page=True, clip=clip)
        page.click("#toggle-nav-sidebar")
        page.go_back()
        functions.get_by_role("link", name="shop.tasks.pay").click()
        expect(page.locator("#run-function")).to_have_value("shop.tasks.pay")
        # every run of the function: 30 a round, 3 of them declined
        expect(page.locator("#run-rows")).to_contain_text("120 of 200 runs match")
        expect(page.locator("#run-rows th.name")).to_have_count(50)
        page.screenshot(path=str(shots / "runs-function.png"), full_page=True)
        page.select_option("#run-outcome", "dead")
        page.click("#run-filter input[type=submit]")
        expect(page.locator("#run-rows th.name")).to_have_count(12)
        expect(page.locator("#run-rows")).to_contain_text("CardDeclined")
        browser.close()
    for name in ("queue-functions", "queue-week", "runs", "runs-function"):
        assert (shots / f"{name}.png").stat().st_size > 5_000
