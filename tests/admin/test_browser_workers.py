"""The Workers page in a real browser (Debian's Chromium, Playwright): real workers come and go.

Two in-process workers drain their queues on the real single server with a fast
heartbeat; the page shows them and the slow task one of them runs (linked to its
task page), and, refreshing in place, drops the worker that stops. The screenshot
is saved as ``test-artifacts/admin/workers.png`` (docs/_static/admin has a copy).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.test import override_settings

from django_redislock import queues
from django_redislock.queue.worker import Worker

from ..conftest import RedisTarget
from ..testapp import tasks
from .conftest import BASE
from .test_browser import CHROMIUM, operator_page

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is missing"),
]

FAST = {"WORKER_HEARTBEAT": 0.5, "WORKER_HEARTBEAT_TTL": 5.0}


@pytest.fixture
def fast(single_target: RedisTarget) -> Iterator[RedisTarget]:
    locks = {**single_target.params(), "KEY_PREFIX": "adm"}
    params = {**single_target.params(**FAST), "KEY_PREFIX": "adm"}
    with override_settings(
        REDISLOCK_LOCKS={"default": locks}, REDISLOCK_QUEUES={"default": params}
    ):
        yield single_target


def start(worker: Worker) -> threading.Thread:
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    return thread


def test_workers_page_follows_the_workers(
    fast: RedisTarget, live_server: Any, django_user_model: Any, artifacts_dir: Path
) -> None:
    from playwright.sync_api import expect, sync_playwright

    django_user_model.objects.create_superuser("operator", "op@example.com", "s3cret-pass")
    # running until the test ends: a loaded machine may take longer than any fixed
    # duration to get the page to show it
    tasks.RELEASE.clear()
    tasks.held.enqueue(args=["report-2026-11"], id="report-2026-11")
    busy = Worker([queues["default"].queue("slow")], timeout=60)
    idle = Worker([queues["default"].queue("orders"), queues["default"].queue("emails")])
    threads = [start(busy), start(idle)]
    try:
        with sync_playwright() as playwright:
            browser, page = operator_page(
                playwright, live_server, f"{BASE}%3Frefresh%3Doff", height=720
            )
            expect(page.locator(".queue-alias caption")).to_contain_text("2 workers alive")
            page.click("#workers-link")
            region = page.locator("#worker-aliases")
            expect(region).to_contain_text("2 alive")
            expect(region).to_contain_text("report-2026-11", timeout=20_000)
            expect(region.locator("a", has_text="report-2026-11")).to_have_attribute(
                "href", f"{BASE}queues/default/slow/tasks/report-2026-11/"
            )
            expect(region).to_contain_text("emails")
            assert page.evaluate("document.documentElement.scrollWidth") <= 1280
            page.screenshot(path=str(artifacts_dir / "admin" / "workers.png"), full_page=True)
            idle.stop()  # a clean stop: gone from the registry at once, from the page at the poll
            expect(region).to_contain_text("1 alive", timeout=20_000)
            expect(region).not_to_contain_text("emails")
            expect(page.locator("#live-status")).to_contain_text("updated")
            browser.close()
    finally:
        tasks.RELEASE.set()
        busy.stop()
        idle.stop()
        for thread in threads:  # the held task ends at the release; nothing outlives the test
            thread.join(20)
    assert not any(thread.is_alive() for thread in threads)
