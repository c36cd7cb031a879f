"""The queue's recent runs: failed, retried and dead-lettered tasks, filtered, paged, linked.

Issue 28 (what Flower, Sidekiq and Bull Board users rely on): a searchable list
of recent failures with runtime, worker and error, and each failure type on a
queue page linking to its tasks. Read from the task history the retry script
already keeps (no write of its own).
"""

from __future__ import annotations

import re

from django.test import Client

from django_redislock.admin.runs import RUNS_PAGE
from django_redislock.queue.history import worker_id

from .conftest import BASE, Dashboard

Q = BASE + "queues/default/orders/"
RUNS = Q + "runs/"
HOSTILE = "<script>alert('runs')</script>"


def fail(queue: object, id: str, error: str, runtime: float = 0.25, attempts: int = 5) -> str:
    queue.enqueue(id, {"task": "shop.tasks.create_order", "args": [id], "kwargs": {}})  # type: ignore[attr-defined]
    (task,) = [t for t in queue.pop(100) if t.id == id]  # type: ignore[attr-defined]
    return str(queue.retry(task, delay=0, error=error, runtime=runtime, max_attempts=attempts))  # type: ignore[attr-defined]


def ids_in(html: str) -> list[str]:
    rows = html.split('id="run-rows">', 1)[1].split("</tbody>", 1)[0]
    return re.findall(r'<th scope="row" class="name"><a href="[^"]+">([^<]+)</a>', rows)


def test_recent_runs_list_filter_and_link(dashboard: Dashboard, admin_client: Client) -> None:
    q = dashboard.queue()
    assert fail(q, "a1", "TimeoutError: the bank did not answer\n\nTraceback ...") == "retried"
    assert fail(q, "a2", f"ValueError: {HOSTILE}", attempts=1) == "dead"
    assert fail(q, "a3", "TimeoutError: again", runtime=2.0) == "retried"
    html = admin_client.get(RUNS).content.decode()
    assert ids_in(html) == ["a3", "a2", "a1"]  # newest first
    assert worker_id() in html and "2.0 s" in html and "250 ms" in html  # not "0.2 s"
    # the type's link and the message are two words, not "TimeoutErrorTimeoutError: again"
    assert re.search(r'>TimeoutError</a> <code class="preview">TimeoutError: again', html)
    assert HOSTILE not in html and "&lt;script&gt;" in html
    timeouts = admin_client.get(RUNS, {"error": "TimeoutError"}).content.decode()
    assert ids_in(timeouts) == ["a3", "a1"]
    dead = admin_client.get(RUNS, {"outcome": "dead"}).content.decode()
    assert ids_in(dead) == ["a2"]
    assert ids_in(admin_client.get(RUNS, {"worker": "no-such-host"}).content.decode()) == []
    assert ids_in(admin_client.get(RUNS, {"within": "15"}).content.decode()) == ["a3", "a2", "a1"]
    # each run links to its task, each type to the runs of that type
    assert f'href="{Q}tasks/a1/"' in html and f'href="{RUNS}?error=TimeoutError"' in html
    live = admin_client.get(RUNS, {"live": "1"}).json()["regions"]["run-rows"]
    assert "a3" in live


def test_the_queue_page_links_its_failure_types_and_runs(
    dashboard: Dashboard, admin_client: Client
) -> None:
    from django_redislock.admin.queues import trend_context
    from django_redislock.queue.rates import Trend

    q = dashboard.queue()
    fail(q, "b1", "KeyError: 'sku'")
    html = admin_client.get(Q).content.decode()
    assert f'id="recent-runs" href="{RUNS}"' in html
    from django_redislock.queue.rates import OUTCOMES

    trend = Trend(
        now=3600,
        minute_start=0,
        second_start=3420,
        minutes={o: [0] * 60 for o in OUTCOMES},
        seconds={o: [0] * 180 for o in OUTCOMES},
        types=[("shop.errors.Boom", 3)],
    )
    (link,) = trend_context(trend, q)["failure_types"]
    assert link == ("shop.errors.Boom", 3, f"{RUNS}?error=shop.errors.Boom")


def test_runs_are_paged(dashboard: Dashboard, admin_client: Client) -> None:
    q = dashboard.queue()
    for i in range(RUNS_PAGE + 5):
        fail(q, f"p{i:03d}", "OSError: disk")
    first = ids_in(admin_client.get(RUNS).content.decode())
    second = ids_in(admin_client.get(RUNS, {"page": "2"}).content.decode())
    assert len(first) == RUNS_PAGE and len(second) == 5 and not set(first) & set(second)
    for crafted in ("0", "-3", "x", "9" * 30):
        assert admin_client.get(RUNS, {"page": crafted, "within": crafted}).status_code == 200
    assert admin_client.get(BASE + "queues/default/nothing-here/runs/").status_code == 404
