"""The dashboard in a real browser: headless Chromium (Debian's package) driven by Playwright.

Logs in on a live server, opens the overview with held locks and queued tasks,
force-releases a lock and requeues a dead task, and saves a screenshot of each
page in ``test-artifacts/admin/`` (the docs use copies of them).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from django_redislock.exceptions import LockLost

from .conftest import BASE, Dashboard, dead_task

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def operator_page(playwright: Any, live_server: Any, to: str, height: int = 800) -> tuple[Any, Any]:
    """A headless Chromium (1,280 x ``height``) signed in as the ``operator`` superuser the
    test created (password ``s3cret-pass``), on the page ``to``: ``(browser, page)``."""
    browser = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
    page = browser.new_page(viewport={"width": 1280, "height": height})
    page.set_default_timeout(15_000)
    log_in(page, live_server, to)
    return browser, page


def log_in(page: Any, live_server: Any, to: str) -> None:
    """Sign ``page`` in as the ``operator`` superuser and go on to ``to``."""
    page.goto(f"{live_server.url}/admin/login/?next={to}")
    page.fill("#id_username", "operator")
    page.fill("#id_password", "s3cret-pass")
    page.click("input[type=submit]")


pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not os.path.exists(CHROMIUM), reason=f"{CHROMIUM} is missing (dev.py test installs it)"
    ),
]


def seed(dashboard: Dashboard) -> list[Any]:
    """A flash sale in progress: held locks of every kind, a busy queue with dead letters."""
    held = []
    for name in ("order:1042", "order:1043"):
        lock = dashboard.locks.lock(name, ttl=120)
        assert lock.acquire(blocking=False)
        held.append(lock)
    stock = dashboard.locks.lock("stock:sku-7", ttl=90, reentrant=True)
    assert stock.acquire(blocking=False) and stock.acquire(blocking=False)
    catalog = dashboard.locks.read_write_lock("catalog", ttl=60)
    readers = [catalog.read(), catalog.read()]
    for reader in readers:
        assert reader.acquire(blocking=False)
    report = dashboard.locks.read_write_lock("report:daily", ttl=300).write()
    assert report.acquire(blocking=False)
    orders = dashboard.queue("orders")
    for id, error in (("order-977", "PaymentDeclined: card expired"), ("order-978", "Timeout")):
        dead_task(orders, id, error=error)
    orders.enqueue_many(
        [
            (f"order-{1000 + i}", {"sale": 7, "user": 4200 + i, "sku": "sku-7", "qty": 1})
            for i in range(23)
        ]
    )
    orders.enqueue("order-reminder", {"user": 4242, "template": "<b>Your order</b>"}, delay=900)
    orders.pop(2)
    dashboard.queue("emails").enqueue_many(
        [(f"mail-{i}", {"to": f"u{i}@example.com"}) for i in range(4)]
    )
    exports = dashboard.locks.semaphore("exports:tenant-7", permits=3, ttl=120)
    permits = [exports.acquire(blocking=False) for _ in range(2)]
    assert all(permits)
    return [*held, stock, *readers, report, *permits]


def release_a_lock(page: Any, expect: Any, shot: Any) -> None:
    """From the overview: the locks page, the confirmation, the release."""
    page.click("text=Show held locks")
    expect(page.locator("#result_list")).to_contain_text("stock:sku-7")
    shot("locks")
    page.locator("tr", has_text="order:1042").locator(".release-link").click()
    expect(page.locator("#content")).to_contain_text("Force-release the lock")
    shot("release-confirm")
    page.click("input[value='Yes, release it']")
    expect(page.locator(".messagelist")).to_contain_text("Released lock “order:1042”")
    expect(page.locator("#result_list")).not_to_contain_text("order:1042")
    shot("locks-released")


def release_a_permit(page: Any, expect: Any, shot: Any, permit_id: str) -> None:
    """From the locks page: the semaphores and fair locks page, one permit force-released."""
    page.click("#coordination-link a")
    row = page.locator("tr.coord-row", has_text="exports:tenant-7")
    expect(row).to_contain_text(permit_id)
    shot("coordination-permit")
    row.locator("li.holder", has_text=permit_id).locator(".release-link").click()
    expect(page.locator("#content")).to_contain_text("Force-release the permit")
    page.click("input[value='Yes, release it']")
    expect(page.locator(".messagelist")).to_contain_text(f"Released permit {permit_id}")
    expect(page.locator("tr.coord-row", has_text="exports:tenant-7")).not_to_contain_text(permit_id)


def requeue_dead_tasks(page: Any, expect: Any, shot: Any, queue_url: str) -> None:
    """One dead task from its page, then the rest with "select all" and the bulk action."""
    page.goto(queue_url)
    expect(page.locator("#result_list")).to_contain_text("order-1002")
    shot("queue")
    page.click("#state-tabs >> text=Dead")
    expect(page.locator("#result_list")).to_contain_text("PaymentDeclined")
    shot("queue-dead")
    page.click("text=order-977")
    expect(page.locator("#payload")).to_contain_text('"id": "order-977"')
    shot("task")
    page.click("#requeue-button")
    expect(page.locator(".messagelist")).to_contain_text("1 task(s) requeued")
    shot("requeued")
    page.check("#action-toggle")
    expect(page.locator(".action-select").first).to_be_checked()
    page.select_option("#bulk-action", "requeue")
    page.click("#changelist-form button[type=submit]")
    expect(page.locator(".messagelist")).to_contain_text("1 task(s) requeued: “order-978”")


def test_operator_releases_a_lock_and_requeues_a_dead_task(
    single: Dashboard, live_server: Any, django_user_model: Any, artifacts_dir: Path
) -> None:
    from playwright.sync_api import expect, sync_playwright

    django_user_model.objects.create_superuser("operator", "op@example.com", "s3cret-pass")
    held = seed(single)
    shots = artifacts_dir / "admin"
    shots.mkdir(exist_ok=True)
    with sync_playwright() as playwright:
        browser, page = operator_page(playwright, live_server, f"{BASE}%3Frefresh%3Doff")

        def shot(name: str) -> None:
            page.screenshot(path=str(shots / f"{name}.png"), full_page=True)

        expect(page.locator("#lock-aliases")).to_contain_text("default 5")
        expect(page.locator(".queue-alias")).to_contain_text("orders")
        shot("overview")
        release_a_lock(page, expect, shot)
        release_a_permit(page, expect, shot, held[-2].id)
        requeue_dead_tasks(page, expect, shot, f"{live_server.url}{BASE}queues/default/orders/")
        browser.close()

    with pytest.raises(LockLost):
        held[0].ensure_held()
    with pytest.raises(LockLost):
        held[-2].ensure_held()  # the permit released from the semaphores page
    held[-1].ensure_held()  # the other permit is still held
    for id in ("order-977", "order-978"):
        task = single.queue("orders").get(id)
        assert task is not None and task.state == "ready"
    for name in ("overview", "locks", "release-confirm", "queue", "queue-dead", "task"):
        assert (shots / f"{name}.png").stat().st_size > 10_000


def test_chromium_is_the_system_package() -> None:
    """Guard against a stray ``playwright install``: the test must drive Debian's Chromium."""
    assert shutil.which("chromium") == CHROMIUM or os.path.exists(CHROMIUM)


def test_long_errors_wrap_and_the_audit_trail_links_back(
    single: Dashboard, live_server: Any, django_user_model: Any, artifacts_dir: Path
) -> None:
    from playwright.sync_api import expect, sync_playwright

    django_user_model.objects.create_superuser("operator", "op@example.com", "s3cret-pass")
    seed(single)
    orders = single.queue("orders")
    dead_task(orders, "order-979", error="ValueError: " + "x" * 3000)  # one unbroken word
    shots = artifacts_dir / "admin"
    shots.mkdir(exist_ok=True)
    with sync_playwright() as playwright:
        browser, page = operator_page(
            playwright, live_server, f"{BASE}queues/default/orders/%3Fstate%3Ddead"
        )
        expect(page.locator("#result_list")).to_contain_text("order-979")
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= 1280, f"the dead-task table is {width} px wide"
        page.click("text=order-979")
        expect(page.locator("#task-fields")).to_contain_text("ValueError")
        assert page.evaluate("document.documentElement.scrollWidth") <= 1280
        page.click("#requeue-button")
        expect(page.locator(".messagelist")).to_contain_text("1 task(s) requeued")
        page.goto(f"{live_server.url}{BASE}?refresh=off")
        page.click("#audit-link")
        expect(page.locator("#result_list")).to_contain_text("task order-979 (orders)")
        page.screenshot(path=str(shots / "audit.png"), full_page=True)
        page.click("text=task order-979 (orders)")
        expect(page.locator("#task-fields")).to_contain_text("order-979")
        browser.close()
    assert (shots / "audit.png").stat().st_size > 10_000


def test_queue_page_refreshes_in_place(
    single: Dashboard, live_server: Any, django_user_model: Any, artifacts_dir: Path
) -> None:
    from playwright.sync_api import expect, sync_playwright

    django_user_model.objects.create_superuser("operator", "op@example.com", "s3cret-pass")
    orders = single.queue("orders")
    orders.enqueue("order-1", {"n": 1})
    with sync_playwright() as playwright:
        browser, page = operator_page(playwright, live_server, f"{BASE}queues/default/orders/")
        expect(page.locator("#result_list")).to_contain_text("order-1")
        page.evaluate("window.marker = 'no reload'")
        orders.enqueue("order-2", {"n": 2})
        # the next poll (every 5 s) brings it; expect's own default wait is only 5 s
        expect(page.locator("#result_list")).to_contain_text("order-2", timeout=20_000)
        expect(page.locator("#state-tabs")).to_contain_text("Ready2")
        expect(page.locator("#live-status")).to_contain_text("updated")
        assert page.evaluate("window.marker") == "no reload"  # refreshed in place
        page.evaluate(
            "Object.defineProperty(document, 'hidden', {value: true, configurable: true});"
            "document.dispatchEvent(new Event('visibilitychange'))"
        )
        expect(page.locator("#live-status")).to_contain_text("paused while the tab is hidden")
        page.screenshot(path=str(artifacts_dir / "admin" / "queue-live.png"), full_page=True)
        browser.close()


def test_flash_sale_panel_follows_the_sale(
    single: Dashboard, live_server: Any, django_user_model: Any, artifacts_dir: Path
) -> None:
    from datetime import timedelta
    from decimal import Decimal

    from django.test import override_settings
    from django.utils import timezone
    from playwright.sync_api import expect, sync_playwright
    from shop.models import Product
    from shop.services import open_sale

    django_user_model.objects.create_superuser("operator", "op@example.com", "s3cret-pass")
    product = Product.objects.create(name="Phone X", price=Decimal("999.00"))
    sale = open_sale(product, 100, closes=timezone.now() + timedelta(minutes=30))
    for i in range(37):
        assert sale.stock.take(buyer=f"b{i}", data={"sale": sale.pk}).ok
    with (
        override_settings(REDISLOCK_ADMIN_STOCKS="shop.panel.live_stocks"),
        sync_playwright() as playwright,
    ):
        browser, page = operator_page(playwright, live_server, f"{BASE}%3Frefresh%3Doff")
        page.click("#sales-link")
        expect(page.locator("#sale-rows")).to_contain_text("63")  # left
        for i in range(37, 50):
            assert sale.stock.take(buyer=f"b{i}", data={"sale": sale.pk}).ok
        expect(page.locator("#sale-rows")).to_contain_text("50", timeout=20_000)  # refreshed
        assert page.evaluate("document.documentElement.scrollWidth") <= 1280
        page.screenshot(path=str(artifacts_dir / "admin" / "sales.png"), full_page=True)
        browser.close()
