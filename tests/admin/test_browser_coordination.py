"""The semaphores and fair locks page in a real browser (Debian's Chromium, Playwright).

Semaphores with their permits and a queued waiter, a fair lock with its holder and a
waiter, and a latch, as the page lists them; the screenshot is saved as
``test-artifacts/admin/coordination.png`` (``docs/_static/admin`` holds a copy).
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from ..processes import wait_for
from .conftest import BASE, Dashboard
from .test_browser import operator_page, pytestmark  # noqa: F401 - slow, needs Chromium


def test_semaphores_fair_locks_and_a_latch_in_a_browser(
    single: Dashboard, live_server: Any, django_user_model: Any, artifacts_dir: Path
) -> None:
    from playwright.sync_api import expect, sync_playwright

    django_user_model.objects.create_superuser("operator", "op@example.com", "s3cret-pass")
    backend = single.locks
    exports = backend.semaphore("exports:tenant-7", permits=3, ttl=120)
    permits = [exports.acquire(blocking=False) for _ in range(3)]
    reports = backend.semaphore("reports:nightly", permits=4, ttl=300)
    permits.append(reports.acquire(blocking=False))
    ledger = backend.fair_lock("ledger:eu", ttl=60, wait_lease=30)
    assert all(permits) and ledger.acquire(blocking=False)
    backend.latch("import:batch-42", count=3).count_down()
    got: list[Any] = []
    other = backend.fair_lock("ledger:eu", ttl=60, wait_lease=30)

    def fair_wait() -> None:
        if other.acquire(timeout=60):
            other.release()

    waiters = [
        threading.Thread(target=lambda: got.append(exports.acquire(timeout=60))),
        threading.Thread(target=fair_wait),
    ]
    for waiter in waiters:
        waiter.start()
    shots = artifacts_dir / "admin"
    shots.mkdir(exist_ok=True)
    try:
        wait_for(lambda: exports.waiting() == 1 and ledger.waiting() == 1, 60, "both waiters")
        with sync_playwright() as playwright:
            url = f"{BASE}locks/coordination/?alias=default%26refresh%3Doff"
            browser, page = operator_page(playwright, live_server, url)
            rows = page.locator("tr.coord-row")
            expect(rows).to_have_count(4)
            exports_row = rows.filter(has_text="exports:tenant-7")
            expect(exports_row.locator("li.holder")).to_have_count(3)
            expect(exports_row.locator(".waiter-count")).to_have_text("1")
            ledger_row = rows.filter(has_text="ledger:eu")
            expect(ledger_row).to_contain_text(f"fence {ledger.fence}")
            expect(ledger_row.locator(".waiter-count")).to_have_text("1")
            expect(rows.filter(has_text="import:batch-42")).to_contain_text("2")
            # each name on one line: the name column is not squeezed to a few letters
            lines = rows.locator("td.name").evaluate_all(
                "cells => cells.map(c => { const r = document.createRange();"
                " r.selectNodeContents(c); return r.getClientRects().length; })"
            )
            assert lines == [1, 1, 1, 1], lines
            page.screenshot(path=str(shots / "coordination.png"), full_page=True)
            browser.close()
    finally:
        for permit in permits:
            permit.release()
        ledger.release()
        for waiter in waiters:
            waiter.join(60)
    assert got and got[0] is not None
    got[0].release()
    assert (shots / "coordination.png").stat().st_size > 5_000
