"""Searching the recent runs by task function and by time (issue 28).

Each recorded run carries the task function its payload names (the retry script
and the worker's success records get it from the client: a payload the worker
decoded, or the head of a JSON ``@task`` envelope; nothing is unpickled for it).
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from datetime import timezone as dt_timezone

from django.test import Client

from django_redislock import task
from django_redislock.exceptions import Retry
from django_redislock.queue.history import read as read_history
from django_redislock.queue.worker import Worker

from .conftest import BASE, Dashboard

Q = BASE + "queues/default/orders/"
RUNS = Q + "runs/"
HOSTILE = "<script>alert('fn')</script>"
FLAKY_SEEN: set[str] = set()


@task(queue="orders", name="shop.tasks.flaky", max_attempts=3)
def flaky(key: str) -> None:
    if key not in FLAKY_SEEN:
        FLAKY_SEEN.add(key)
        raise Retry("not yet", countdown=0)


def fail(queue: object, id: str, function: str, error: str = "TimeoutError: slow") -> None:
    queue.enqueue(id, {"task": function, "args": [id], "kwargs": {}})  # type: ignore[attr-defined]
    (claimed,) = [t for t in queue.pop(100) if t.id == id]  # type: ignore[attr-defined]
    queue.retry(claimed, delay=0, error=error, runtime=0.1, max_attempts=5)  # type: ignore[attr-defined]


def ids_in(html: str) -> list[str]:
    rows = html.split('id="run-rows">', 1)[1].split("</tbody>", 1)[0]
    return re.findall(r'<th scope="row" class="name"><a href="[^"]+">([^<]+)</a>', rows)


def test_filter_by_function_with_links(dashboard: Dashboard, admin_client: Client) -> None:
    q = dashboard.queue()
    fail(q, "a1", "shop.tasks.create_order")
    fail(q, "b1", "shop.tasks.send_mail", "OSError: smtp")
    fail(q, "a2", "shop.tasks.create_order")
    assert [r.function for r in read_history(q, "a1")] == ["shop.tasks.create_order"]
    html = admin_client.get(RUNS).content.decode()
    assert ids_in(html) == ["a2", "b1", "a1"]
    assert f'href="{RUNS}?function=shop.tasks.send_mail"' in html
    orders = admin_client.get(RUNS, {"function": "shop.tasks.create_order"}).content.decode()
    assert ids_in(orders) == ["a2", "a1"]
    assert ids_in(admin_client.get(RUNS, {"function": "send_mail"}).content.decode()) == ["b1"]
    both = admin_client.get(RUNS, {"function": "create_order", "error": "OSError"})
    assert ids_in(both.content.decode()) == []
    page = admin_client.get(RUNS, {"function": HOSTILE}).content.decode()
    assert HOSTILE not in page and "&lt;script&gt;" in page and ids_in(page) == []


def test_a_hostile_function_name_is_text(dashboard: Dashboard, admin_client: Client) -> None:
    q = dashboard.queue()
    fail(q, "h1", HOSTILE)
    html = admin_client.get(RUNS).content.decode()
    assert ids_in(html) == ["h1"] and HOSTILE not in html
    assert "&lt;script&gt;alert(&#x27;fn&#x27;)&lt;/script&gt;" in html
    assert 'function=%3Cscript%3Ealert%28%27fn%27%29%3C%2Fscript%3E"' in html


def test_filter_by_time(dashboard: Dashboard, admin_client: Client) -> None:
    q = dashboard.queue()
    fail(q, "t1", "shop.tasks.create_order")
    now = datetime.now(dt_timezone.utc)
    hour_ago = (now - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M")
    in_an_hour = (now + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M")
    assert ids_in(admin_client.get(RUNS, {"since": hour_ago}).content.decode()) == ["t1"]
    assert ids_in(admin_client.get(RUNS, {"since": in_an_hour}).content.decode()) == []
    assert ids_in(admin_client.get(RUNS, {"until": hour_ago}).content.decode()) == []
    window = {"since": hour_ago, "until": in_an_hour}
    html = admin_client.get(RUNS, window).content.decode()
    assert ids_in(html) == ["t1"] and f'value="{hour_ago}"' in html
    # junk is no filter and is not echoed back
    for junk in ("yesterday", HOSTILE, "9" * 40, "2026-13-45T99:99"):
        page = admin_client.get(RUNS, {"since": junk, "until": junk})
        assert page.status_code == 200 and ids_in(page.content.decode()) == ["t1"]
        assert HOSTILE not in page.content.decode()


def test_the_worker_records_the_function_of_a_recovery(
    dashboard: Dashboard, admin_client: Client
) -> None:
    q = dashboard.queue()
    FLAKY_SEEN.discard("k1")
    q.enqueue("f1", flaky.payload(["k1"], None))
    Worker([q], batch=10, burst=True).run()
    runs = read_history(q, "f1")
    assert [(r.outcome, r.function) for r in runs] == [
        ("retried", "shop.tasks.flaky"),
        ("succeeded", "shop.tasks.flaky"),
    ]
    html = admin_client.get(RUNS, {"function": "shop.tasks.flaky"}).content.decode()
    assert ids_in(html) == ["f1", "f1"]  # each run is a row: the success, then the retry
    assert html.index("<td>succeeded</td>") < html.index("<td>retried</td>")
