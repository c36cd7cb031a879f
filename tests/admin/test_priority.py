"""The admin's task page shows a task's priority level; its listing keeps every task."""

from __future__ import annotations

import re

from django.test import Client

from .conftest import BASE, Dashboard

Q = BASE + "queues/default/orders/"


def priority_cell(html: str) -> str:
    found = re.search(r'<th scope="row">Priority</th><td>(.*?)</td>', html)
    assert found, "no Priority row"
    return re.sub(r"<[^>]+>", "", found.group(1)).strip()


def test_the_task_page_shows_the_level(dashboard: Dashboard, admin_client: Client) -> None:
    q = dashboard.queue()
    q.enqueue("urgent", {"n": 1}, priority=8)
    q.enqueue("plain", {"n": 2})
    assert priority_cell(admin_client.get(Q + "tasks/urgent/").content.decode()) == "8"
    assert priority_cell(admin_client.get(Q + "tasks/plain/").content.decode()) == (
        "0 (the default)"
    )
    listing = admin_client.get(Q).content.decode()
    assert "urgent" in listing and "plain" in listing
