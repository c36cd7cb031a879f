"""The queue page lists the queue's concurrency groups with their running/limit counts
(issue 29, item 6): fakeredis, a real server and a real cluster."""

from __future__ import annotations

import re
from html import unescape

import pytest
from django.test import Client

from django_redislock import task

from .conftest import BASE, Dashboard

Q = BASE + "queues/default/tenants/"
HOSTILE = "<b>acme</b>"
#: delay() sends after the commit: these tests commit
pytestmark = pytest.mark.django_db(transaction=True)


@task(
    queue="tenants",
    name="tests.admin.sync",
    group_key=lambda t, *a, **k: t,
    group_concurrency=2,
    group_rate_limit="50/s",
)
def sync(tenant: str, n: int) -> None:
    del tenant, n


def group_rows(html: str) -> dict[str, list[str]]:
    table = html.split('id="concurrency-groups"', 1)[1].split("</table>", 1)[0]
    rows = {}
    for row in re.findall(r'<tr class="group[^"]*">(.*?)</tr>', table, re.S):
        name = unescape(re.sub(r"<[^>]+>", "", row.split("</th>", 1)[0])).strip()
        rows[name] = [unescape(c) for c in re.findall(r"<td[^>]*>([^<]*)</td>", row)]
    return rows


def test_the_queue_page_lists_groups_with_running_and_limit(
    dashboard: Dashboard, admin_client: Client
) -> None:
    for n in range(5):
        sync.delay(HOSTILE, n)
    sync.delay("globex", 0)
    q = dashboard.queue("tenants")
    claimed = q.pop(10)
    assert len(claimed) == 3
    response = admin_client.get(Q)
    assert response.status_code == 200
    html = response.content.decode()
    assert HOSTILE not in html  # a group name is text from a call's arguments: escaped
    assert group_rows(html) == {
        HOSTILE: ["2", "2", "3", "50/s"],
        "globex": ["1", "2", "0", "50/s"],
    }
    q.ack(claimed)
    q.purge()
    assert "concurrency-groups" not in admin_client.get(Q).content.decode()


def test_a_queue_without_groups_shows_no_group_table(
    dashboard: Dashboard, admin_client: Client
) -> None:
    dashboard.queue("tenants").enqueue("plain", 1)
    html = admin_client.get(Q).content.decode()
    assert "concurrency-groups" not in html
