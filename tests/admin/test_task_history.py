"""The task page's history of runs, function name and last run."""

from __future__ import annotations

import re
from urllib.parse import quote

from django.test import Client

from django_redislock.queue.history import worker_id

from .conftest import BASE, Dashboard

HOSTILE = "<script>alert('run')</script>"


def test_task_page_shows_the_runs(dashboard: Dashboard, admin_client: Client) -> None:
    q = dashboard.queue()
    q.enqueue("job<1>", {"task": "shop.tasks.send_receipt", "args": [1], "kwargs": {}})
    (task,) = q.pop(1)
    assert q.retry(task, delay=0, error=f"ValueError: {HOSTILE}", runtime=1.5) == "retried"
    (task,) = q.pop(1)
    assert q.retry(task, delay=600, error="KeyError: 'sku'", runtime=0.125) == "retried"
    url = f"{BASE}queues/default/orders/tasks/{quote('job<1>')}/"
    html = admin_client.get(url).content.decode()
    assert '<td class="name" id="task-function">shop.tasks.send_receipt</td>' in html
    runs = html.split('id="task-history">', 1)[1].split("</tbody>", 1)[0]
    assert runs.count("<tr") == 2
    assert runs.index("KeyError") < runs.index("ValueError")  # newest first
    assert "1.500 s" in runs and "0.125 s" in runs and worker_id() in runs
    assert HOSTILE not in html and "&lt;script&gt;alert(&#x27;run&#x27;)&lt;/script&gt;" in runs
    assert "0.125 s, ended" in html.split('id="task-runtime">', 1)[1]
    assert 'id="payload-download"' in html  # the capped payload view keeps its download link
    live = admin_client.get(url, {"live": "1"}).json()["regions"]
    assert "KeyError" in live["task-history"]


def test_a_task_without_runs(dashboard: Dashboard, admin_client: Client) -> None:
    q = dashboard.queue()
    q.enqueue("plain", "not a task envelope")
    html = admin_client.get(f"{BASE}queues/default/orders/tasks/plain/").content.decode()
    assert "No run recorded" in html
    assert '<td class="name" id="task-function">—</td>' in html


def test_a_gone_task_shows_its_runs(dashboard: Dashboard, admin_client: Client) -> None:
    q = dashboard.queue()
    q.enqueue("done-1", None)
    (task,) = q.pop(1)
    q.retry(task, delay=0, error="TimeoutError: slow", runtime=0.5)
    (task,) = q.pop(1)
    assert q.ack(task) == 1  # finished: the page is gone, the runs are kept
    html = admin_client.get(f"{BASE}queues/default/orders/tasks/done-1/").content.decode()
    assert 'id="task-gone"' in html and "TimeoutError: slow" in html
    never = admin_client.get(f"{BASE}queues/default/orders/tasks/never/")
    assert never.status_code == 302  # no task, no runs: back to the queue, as before


def test_the_task_page_shows_when_a_task_was_queued(
    dashboard: Dashboard, admin_client: Client
) -> None:
    q = dashboard.queue()
    q.enqueue("later", {"task": "shop.tasks.send_receipt", "args": [], "kwargs": {}}, delay=3600)
    html = admin_client.get(f"{BASE}queues/default/orders/tasks/later/").content.decode()
    queued = html.split('id="task-enqueued">', 1)[1].split("</td>", 1)[0]
    assert re.match(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d ", queued) and "s ago)" in queued
    assert "Due" in html  # the due time an hour later is shown beside it
    # a task another producer wrote straight into the queue's keys has no enqueue time
    client = q.backend.client
    client.hset(q.keys[3], "foreign", b"raw")
    client.zadd(q.keys[0], {"foreign": 1})
    html = admin_client.get(f"{BASE}queues/default/orders/tasks/foreign/").content.decode()
    assert "not recorded" in html.split('id="task-enqueued">', 1)[1].split("</td>", 1)[0]
