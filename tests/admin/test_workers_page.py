"""The admin's Workers page and the overview's workers count, from the workers registry."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from typing import Any

from django.test import Client

from django_redislock.admin.common import url
from django_redislock.queue.workers import beat, registry_keys

from .conftest import BASE, Dashboard

HOSTILE = '<script>alert("x")</script>'


def record(**extra: Any) -> dict[str, Any]:
    base = {
        "alias": "default",
        "host": "web-1",
        "pid": 4242,
        "queues": ["orders", "emails"],
        "pool": "thread",
        "concurrency": 8,
        "up": 125.0,
        "processed": 1289,
        "failed": 3,
        "tasks": [{"id": "order-1042", "queue": "orders", "age": 3.0}],
    }
    return {**base, **extra}


def test_workers_page_shows_each_worker_and_links_its_tasks(
    dashboard: Dashboard, admin_client: Client
) -> None:
    beat(dashboard.queues, "w1", 60, record())
    beat(dashboard.queues, "w2", 60, record(host="web-2", pid=7, tasks=[], processed=0, failed=0))
    stuck = record(host="web-3", pid=8, health="wedged", wedged="2 of 8 pool threads dead")
    beat(dashboard.queues, "w3", 60, stuck)
    response = admin_client.get(BASE + "workers/")
    assert response.status_code == 200
    html = response.content.decode()
    assert "Workers of alias “default”: 3 alive" in html
    assert len(re.findall(r'<tr class="worker-row">', html)) == 3
    assert "wedged: 2 of 8 pool threads dead" in html.split(">web-3</th>", 1)[1]
    assert html.count("wedged:") == 1  # the healthy ones say nothing
    web1 = html.split(">web-1</th>", 1)[1].split("</tr>", 1)[0]
    assert '<td class="numeric">4242</td>' in web1 and "thread &times; 8" in web1
    assert f'href="{BASE}queues/default/orders/">orders</a>' in web1
    assert f'href="{BASE}queues/default/orders/tasks/order-1042/">order-1042</a>' in web1
    assert re.search(r"\(orders\) for [34]\.\d s", web1)
    assert '<td class="numeric">1,289</td>' in web1 and ">3</strong>" in web1
    assert "2 min 5 s" in web1 or "2 min 6 s" in web1  # up for
    assert "idle" in html.split(">web-2</th>", 1)[1].split("</tr>", 1)[0]
    assert 'id="live-status"' in html  # refreshes in place
    live = admin_client.get(BASE + "workers/?live=1")
    assert "web-2" in json.loads(live.content)["regions"]["worker-aliases"]


def test_a_worker_that_stopped_beating_disappears(
    dashboard: Dashboard, admin_client: Client
) -> None:
    beat(dashboard.queues, "dying", 0.5, record(host="dying-host"))
    assert "dying-host" in admin_client.get(BASE + "workers/").content.decode()
    deadline = time.monotonic() + 10
    while "dying-host" in admin_client.get(BASE + "workers/").content.decode():
        assert time.monotonic() < deadline, "the silent worker is still listed"
        time.sleep(0.05)
    assert (
        "No worker is running on this alias."
        in admin_client.get(BASE + "workers/").content.decode()
    )


def test_hostile_worker_fields_are_escaped_and_never_break_a_link(
    dashboard: Dashboard, admin_client: Client
) -> None:
    tasks = [
        {"id": HOSTILE, "queue": "orders", "age": 1},
        {"id": "", "queue": "", "age": 1},  # no URL can hold an empty segment: shown unlinked
        {"id": "../..", "queue": "..", "age": 1},
    ]
    beat(dashboard.queues, "evil", 60, record(host=HOSTILE, queues=[HOSTILE, ""], tasks=tasks))
    index, records = registry_keys(dashboard.queues)
    dashboard.target.raw.zadd(index, {"junk": 9e15})
    dashboard.target.raw.hset(records, "junk", b"123:not json")
    response = admin_client.get(BASE + "workers/")
    assert response.status_code == 200
    html = response.content.decode()
    assert HOSTILE not in html and "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in html
    assert f'href="{url("task", "default", "..", "../..")}">../..</a>' in html
    assert f'href="{url("task", "default", "orders", HOSTILE)}">&lt;script' in html
    assert "1 record(s) in the registry are not this app's" in html and "junk" in html


def test_overview_counts_live_workers_per_alias(dashboard: Dashboard, admin_client: Client) -> None:
    dashboard.queue().enqueue("a", None)
    html = admin_client.get(BASE).content.decode()
    assert "0 workers alive" in html and f'href="{BASE}workers/" id="workers-link"' in html
    beat(dashboard.queues, "w1", 60, record())
    html = admin_client.get(BASE).content.decode()
    assert "1 worker alive" in html


def test_workers_page_needs_the_view_permission(
    fake: Dashboard, staff_client: Callable[..., Client], client: Client
) -> None:
    beat(fake.queues, "w1", 60, record())
    assert staff_client().get(BASE + "workers/").status_code == 403
    assert staff_client("view_dashboard").get(BASE + "workers/").status_code == 200
    assert client.get(BASE + "workers/").status_code == 302  # to the login page


def test_an_unreachable_alias_shows_its_error(admin_client: Client) -> None:
    from django.test import override_settings

    down = {"default": {"LOCATION": "redis://127.0.0.1:1/0"}}
    with override_settings(REDISLOCK_QUEUES=down, REDISLOCK_LOCKS=down):
        html = admin_client.get(BASE + "workers/").content.decode()
    assert "Workers of alias “default”" in html and "unreachable" in html


def test_workers_page_has_a_summary_a_filter_and_pages(
    dashboard: Dashboard, admin_client: Client
) -> None:
    """Issue 28: 202 workers made a 32,582 px page with no summary, filter or paging."""
    from django_redislock.admin.workers import TASKS_SHOWN, WORKERS_PAGE

    many = [{"id": f"t{i}", "queue": "orders", "age": 1.0} for i in range(40)]
    for i in range(WORKERS_PAGE + 12):
        host = f"web-{i % 3}"
        busy = (
            many if i == 0 else ([] if i % 2 else [{"id": f"x{i}", "queue": "orders", "age": 1.0}])
        )
        extra = {"health": "wedged", "wedged": "pool threads dead"} if i == 5 else {}
        beat(dashboard.queues, f"w{i:03d}", 60, record(host=host, pid=i, tasks=busy, **extra))
    html = admin_client.get(BASE + "workers/").content.decode()
    summary = html.split('class="worker-summary"', 1)[1].split("</tbody>", 1)[0]
    total = WORKERS_PAGE + 12
    assert f"<strong>{total}</strong> live" in summary
    assert "wedged" in summary and "web-0</span> 21" in summary  # 62 workers on 3 hosts
    assert len(re.findall(r'<tr class="worker-row">', html)) == WORKERS_PAGE
    assert f"showing 1\u2013{WORKERS_PAGE} of {total} matching" in summary
    assert html.count('class="running-task"') <= WORKERS_PAGE * TASKS_SHOWN
    assert f"and {40 - TASKS_SHOWN} more" in html  # the 40-task worker lists 5
    second = admin_client.get(BASE + "workers/", {"page": "2"}).content.decode()
    assert len(re.findall(r'<tr class="worker-row">', second)) == 12
    wedged = admin_client.get(BASE + "workers/", {"show": "wedged"}).content.decode()
    assert len(re.findall(r'<tr class="worker-row">', wedged)) == 1
    found = admin_client.get(BASE + "workers/", {"q": "WEB-2"}).content.decode()
    rows = re.findall(r'<tr class="worker-row">\s*<th scope="row" class="name"[^>]*>([^<]+)', found)
    assert rows and set(rows) == {"web-2"}
    for crafted in ("-1", "x", "99999999999999999999999", HOSTILE):
        page = admin_client.get(BASE + "workers/", {"page": crafted, "q": crafted, "show": crafted})
        assert page.status_code == 200 and HOSTILE not in page.content.decode()
