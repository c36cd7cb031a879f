"""Issue 28's layout points and the refresh choice in a real browser (Debian's Chromium).

* long unbroken worker hosts and queue names widened the workers table to 2,925 px
  and the overview to 6,067 px (only ``td.name`` wrapped): both pages stay within
  the window;
* numbers in red split mid-digit ("3,00/0"): no number of a table wraps, even in
  a narrow window;
* the live refresh interval is a choice (off, 2 s, 5 s, 15 s), kept for the next
  page: "off" sends no poll, "2 s" polls.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from django_redislock.queue.workers import beat

from .conftest import BASE, Dashboard, dead_task
from .test_browser import ARGS, CHROMIUM, log_in, operator_page
from .test_workers_page import record

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is missing"),
]

LONG = "x" * 300  # one unbroken word

#: Each text with a digit inside a ``td.numeric`` cell (its number, a red count in its
#: ``strong``), and the count of distinct line tops it is drawn on (1: one line).
LINES = """() => Array.from(document.querySelectorAll("td.numeric")).flatMap((cell) => {
  const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
  const found = [];
  for (let node = walker.nextNode(); node !== null; node = walker.nextNode()) {
    if (!/\\d/.test(node.textContent)) continue;
    const range = document.createRange();
    range.selectNodeContents(node);
    const tops = new Set(Array.from(range.getClientRects()).map((r) => Math.round(r.top)));
    found.push([node.textContent.trim(), tops.size]);
  }
  return found;
})"""


def test_long_names_never_widen_a_page_and_numbers_never_wrap(
    single: Dashboard, live_server: Any, django_user_model: Any
) -> None:
    from playwright.sync_api import expect, sync_playwright

    django_user_model.objects.create_superuser("operator", "op@example.com", "s3cret-pass")
    beat(single.queues, "w1", 60, record(host="host-" + LONG, queues=["q-" + LONG]))
    long_queue = single.queue("q-" + LONG)
    long_queue.enqueue("t1", {"n": 1})
    orders = single.queue("orders")
    for i in range(3):
        dead_task(orders, f"dead-{i}")
    orders.enqueue_many([(f"o{i}", {"n": i}) for i in range(3000)])
    with sync_playwright() as playwright:
        browser, page = operator_page(playwright, live_server, f"{BASE}%3Frefresh%3Doff")
        expect(page.locator("body")).to_contain_text("3,000")
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= 1280, f"the overview is {width} px wide"
        page.goto(f"{live_server.url}{BASE}workers/")
        expect(page.locator("#worker-aliases")).to_contain_text("host-xxx")
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= 1280, f"the workers page is {width} px wide"
        page.set_viewport_size({"width": 480, "height": 800})  # numbers squeezed
        for path in ("", "workers/", "queues/default/orders/"):
            page.goto(f"{live_server.url}{BASE}{path}")
            cells = page.evaluate(LINES)
            assert cells, path
            wrapped = [text for text, lines in cells if lines > 1]
            assert wrapped == [], f"{path or 'overview'}: numbers split over lines: {wrapped}"
        browser.close()


def test_the_refresh_interval_is_chosen_and_kept(
    single: Dashboard, live_server: Any, django_user_model: Any
) -> None:
    from playwright.sync_api import expect, sync_playwright

    django_user_model.objects.create_superuser("operator", "op@example.com", "s3cret-pass")
    single.queue("orders").enqueue("t1", {"n": 1})
    polls: list[str] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        page.set_default_timeout(20_000)
        page.on("request", lambda r: polls.append(r.url) if "live=1" in r.url else None)
        log_in(page, live_server, f"{BASE}queues/default/orders/")
        status = page.locator("#live-status")
        assert page.locator("#live-every").input_value() == "5"
        for seconds in ("off", "every 2 s", "every 5 s", "every 15 s"):
            assert page.locator(f"#live-every option:text-is('{seconds}')").count() == 1
        page.select_option("#live-every", "2")
        expect(status).to_contain_text("every 2 s")
        expect(status).to_contain_text("updated", timeout=20_000)  # a poll came back
        assert polls
        page.select_option("#live-every", "0")
        expect(status).to_contain_text("off")
        page.reload()  # the choice is kept for the next page
        assert page.locator("#live-every").input_value() == "0"
        expect(status).to_contain_text("off")
        before = len(polls)
        page.wait_for_timeout(3000)  # twice the shortest interval: none may come
        assert len(polls) == before
        page.select_option("#live-every", "5")  # leave the usual pace for the other tests
        browser.close()
