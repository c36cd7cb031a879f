"""Rough edges of issue 28, point 4: each one as a request or a unit test that fails on main.

* the prefix search returned up to a thousand rows (one ZSCAN call's matches)
  while the docs say 50;
* the zero "failed" line of a sparkline was drawn over the others in red;
* no-op actions were logged as successes ("Purge: 0 deleted", resuming a queue
  that was not paused).
"""

from __future__ import annotations

from typing import Any

from django.contrib.admin.models import LogEntry
from django.test import Client

from django_redislock.admin.charts import COLOURS, spark
from django_redislock.admin.search import PREFIX_HITS, find_prefix
from django_redislock.queue.rates import Trend

from .conftest import BASE, Dashboard

Q = BASE + "queues/default/orders/"


def test_the_prefix_search_pages_fifty_rows_at_a_time(dashboard: Dashboard) -> None:
    queue = dashboard.queue()
    ids = [f"job-{i:04d}" for i in range(300)]
    queue.enqueue_many([(id, {"n": i}) for i, id in enumerate(ids)])
    queue.enqueue("other", {"n": -1})
    seen: list[str] = []
    cursor = ""
    for _ in range(40):
        hits = find_prefix(queue, "job-", cursor)
        assert len(hits.rows) <= PREFIX_HITS
        seen += [row.id for row in hits.rows]
        cursor = hits.cursor
        if not cursor:
            break
    assert sorted(set(seen)) == ids  # every match, each page at most 50


def test_a_crafted_prefix_cursor_is_harmless(dashboard: Dashboard, admin_client: Client) -> None:
    dashboard.queue().enqueue("job-1", {"n": 1})
    for cursor in ("0:0:99999999999", "2:x:y", "9:1:1", "::", "0:0:-5"):
        page = admin_client.get(Q, {"q": "job-", "match": "prefix", "from": cursor})
        assert page.status_code == 200, cursor


def trend(**minutes: list[int]) -> Any:
    from django_redislock.queue.rates import OUTCOMES

    blank = [0] * 60
    return Trend(
        now=3600,
        minute_start=0,
        second_start=3420,
        minutes={o: minutes.get(o, blank) for o in OUTCOMES},
        seconds={o: [0] * 180 for o in OUTCOMES},
    )


def test_a_zero_failed_line_is_not_drawn() -> None:
    busy = [5] * 60
    svg = spark(trend(enqueued=busy, succeeded=busy), ("enqueued", "succeeded", "failed"))
    assert COLOURS["failed"] not in svg and COLOURS["enqueued"] in svg
    failing = spark(trend(failed=[0] * 59 + [2]), ("enqueued", "succeeded", "failed"))
    assert COLOURS["failed"] in failing


def test_no_op_actions_are_not_logged_as_done(dashboard: Dashboard, admin_client: Client) -> None:
    dashboard.queue().enqueue("t1", {"n": 1})
    dashboard.queue().pop(1)  # in flight: nothing dead to requeue
    before = LogEntry.objects.count()
    resume = admin_client.post(Q + "flow/resume/", follow=True).content.decode()
    assert "was already not paused; nothing changed" in resume
    requeue = admin_client.post(Q + "requeue-dead/", {"count": "0"}, follow=True)
    assert "had no task dead to requeue; nothing changed" in requeue.content.decode()
    assert LogEntry.objects.count() == before  # nothing logged
    pause = admin_client.post(Q + "flow/pause/", follow=True).content.decode()
    assert "paused" in pause and LogEntry.objects.count() == before + 1
    again = admin_client.post(Q + "flow/pause/", follow=True).content.decode()
    assert "was already paused; nothing changed" in again
    assert LogEntry.objects.count() == before + 1


def test_a_wrongtype_error_names_the_key(dashboard: Dashboard, admin_client: Client) -> None:
    broken = dashboard.queue("broken")
    broken.enqueue("y")
    client = dashboard.queues.client
    client.delete(broken.keys[0])
    client.sadd(broken.keys[0], "not a zset")
    key = broken.keys[0]
    overview = admin_client.get(BASE).content.decode()
    row = overview.split('<tr class="trouble queue-error">', 1)[1].split("</tr>", 1)[0]
    assert "WRONGTYPE" in row and f"key &#x27;{key}&#x27; holds a set, not a zset" in row
    page = admin_client.get(BASE + "queues/default/broken/").content.decode()
    assert f"key &#x27;{key}&#x27; holds a set, not a zset" in page


def test_error_previews_start_with_the_message(dashboard: Dashboard, admin_client: Client) -> None:
    q = dashboard.queue()
    q.enqueue("e1", {"n": 1})
    (task,) = q.pop(1)
    # what the worker records: the message, a blank line, the end of the traceback (cut anywhere)
    error = (
        "KeyError: 'sku'\n\nn3.11/site-packages/shop/tasks.py\", line 9, in run\n  raise KeyError\n"
    )
    assert q.retry(task, delay=600, error=error, runtime=0.1) == "retried"
    rows = admin_client.get(Q, {"state": "delayed"}).content.decode()
    row = rows.split('id="task-rows">', 1)[1].split("</tr>", 1)[0]
    assert "KeyError: &#x27;sku&#x27;" in row and "site-packages" not in row
    page = admin_client.get(Q + "tasks/e1/").content.decode()
    assert "[…]\n  raise KeyError" in page and "n3.11/site-packages" not in page
