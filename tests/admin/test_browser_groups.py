"""A queue page's concurrency groups table in a real browser (Debian's Chromium, Playwright).

Four tenants' tasks with ``group_concurrency=2``: the big tenant's backlog waits held while
two of its tasks run; the table is saved as ``test-artifacts/admin/queue-groups.png``
(``docs/_static/admin`` holds a copy).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from django_redislock import task

from .conftest import BASE, Dashboard
from .test_browser import operator_page
from .test_browser import pytestmark as browser_marks

#: delay() sends after the commit: this test commits
pytestmark = [*browser_marks, pytest.mark.django_db(transaction=True)]

TENANTS = {"acme": 12, "globex": 5, "initech": 3, "umbrella": 1}


@task(
    queue="tenants",
    name="tests.admin.browser_groups.sync",
    group_key=lambda tenant, *a, **k: tenant,
    group_concurrency=2,
    group_rate_limit="50/s",
)
def sync(tenant: str, n: int) -> None:
    del tenant, n


def test_the_concurrency_groups_table_in_a_browser(
    single: Dashboard, live_server: Any, django_user_model: Any, artifacts_dir: Path
) -> None:
    from playwright.sync_api import expect, sync_playwright

    django_user_model.objects.create_superuser("operator", "op@example.com", "s3cret-pass")
    for tenant, count in TENANTS.items():
        for n in range(count):
            sync.delay(tenant, n)
    q = single.queue("tenants")
    claimed = q.pop(5)  # five running; "running" counts the admitted ones, ready or running
    assert len(claimed) == 5
    shots = artifacts_dir / "admin"
    shots.mkdir(exist_ok=True)
    with sync_playwright() as playwright:
        browser, page = operator_page(playwright, live_server, f"{BASE}queues/default/tenants/")
        table = page.locator("#concurrency-groups")
        rows = table.locator("tbody tr")
        expect(rows).to_have_count(len(TENANTS))
        expect(rows.first).to_contain_text("acme")  # the most held first
        expect(rows.first).to_contain_text("10")  # acme: 12 queued, 2 admitted
        table.screenshot(path=str(shots / "queue-groups.png"))
        browser.close()
    q.ack(claimed)
    q.purge()
    assert (shots / "queue-groups.png").stat().st_size > 3_000
