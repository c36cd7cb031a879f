"""The dashboard pages on fakeredis, a real server and a real cluster."""

from __future__ import annotations

import re
from html import unescape
from urllib.parse import quote

from django.test import Client

from .conftest import BASE, Dashboard, dead_task, grant_many

#: Ids and lock names that must survive URLs, HTML and Redis unchanged.
NASTY = ["a/b/c", "with space", "quote'\"s", "ünïcødé✓", "<b>html</b>&amp;", "50%_2F_x:y"]


def rows(html: str) -> list[str]:
    """The first cell of each result row (ids of tasks, names of locks)."""
    body = html.split('id="result_list"', 1)[1].split("</table>", 1)[0]
    return re.findall(r'<td class="name">(?:<a href="[^"]*">)?(.*?)(?:</a>)?</td>', body)


def test_overview_lists_locks_and_queues(dashboard: Dashboard, admin_client: Client) -> None:
    q = dashboard.queue()
    q.enqueue_many([("a", {"n": 1}), ("b", {"n": 2})])
    q.enqueue("later", {"n": 3}, delay=600)
    dead_task(q, "broken")
    dashboard.queue("mail").enqueue("m1", None)
    with dashboard.locks.lock("order:1", ttl=30), dashboard.locks.lock("order:2", ttl=30):
        response = admin_client.get(BASE)
    assert response.status_code == 200
    html = response.content.decode()
    assert 'id="live-status" data-interval="5"' in html  # tables refresh in place
    assert re.search(r'<th scope="row">default</th>\s*<td class="numeric">2</td>', html)
    orders = html.split(">orders</a>", 1)[1].split("</tr>", 1)[0]
    assert re.findall(r'class="numeric">(?:<strong class="error-text">)?(\d+)', orders)[:4] == [
        "2", "1", "0", "1"
    ]  # fmt: skip
    assert ">mail</a>" in html
    assert "Redis locks &amp; queues" in html  # the app's breadcrumb
    off = admin_client.get(BASE + "?refresh=off").content.decode()
    assert 'id="live-status"' not in off and "turn on" in off


def test_admin_index_shows_the_section(dashboard: Dashboard, admin_client: Client) -> None:
    html = admin_client.get("/admin/").content.decode()
    assert "Redis locks &amp; queues" in html and BASE in html
    assert admin_client.get("/admin/django_redislock/").status_code == 200


def test_locks_page_lists_holders_and_filters(dashboard: Dashboard, admin_client: Client) -> None:
    rw = dashboard.locks.read_write_lock("doc:7", ttl=30)
    with dashboard.locks.lock("order:1", ttl=30) as lock, rw.read(), rw.read():
        html = admin_client.get(BASE + "locks/?alias=default").content.decode()
        assert rows(html) == ["doc:7", "order:1"]
        assert f"pid {__import__('os').getpid()}" in html and "thread MainThread" in html
        assert f'<td class="numeric">{lock.fence}</td>' in html and "2 readers" in html
        assert "Force release" in html
        filtered = admin_client.get(BASE + "locks/?alias=default&prefix=order").content.decode()
        assert rows(filtered) == ["order:1"]
        none = admin_client.get(BASE + "locks/?alias=default&prefix=zzz").content.decode()
        assert "No held lock starts with" in none
    assert admin_client.get(BASE + "locks/?alias=nope").status_code == 404


def test_locks_page_pages_by_name(dashboard: Dashboard, admin_client: Client) -> None:
    names = [f"job:{i:03d}" for i in range(120)]
    grant_many(dashboard.locks, names)
    seen: list[str] = []
    link = BASE + "locks/?alias=default"
    for _ in range(5):
        html = admin_client.get(link).content.decode()
        seen += rows(html)
        found = re.search(r'<a href="([^"]+)" class="next-page">', html)
        if not found:
            break
        link = unescape(found.group(1))
    assert seen == names


def link(html: str, kind: str) -> str | None:
    """The URL of the paginator's ``<kind>-page`` link (next, previous, first), if shown."""
    found = re.search(rf'<a href="([^"]+)" class="{kind}-page">', html)
    return unescape(found.group(1)) if found else None


def test_locks_page_pages_back_by_name(dashboard: Dashboard, admin_client: Client) -> None:
    names = [f"job:{i:03d}" for i in range(120)] + ["other:1"]
    grant_many(dashboard.locks, names)
    first = admin_client.get(BASE + "locks/?alias=default&prefix=job:").content.decode()
    assert link(first, "previous") is None and link(first, "first") is None
    second_url = link(first, "next")
    assert second_url is not None
    second = admin_client.get(second_url).content.decode()
    assert rows(second) == names[50:100] and link(second, "first") is not None
    back_url = link(second, "previous")
    assert back_url is not None and "before=job%3A050" in back_url and "prefix=job%3A" in back_url
    back = admin_client.get(back_url).content.decode()
    assert rows(back) == rows(first) == names[:50]
    assert link(back, "previous") is None  # nothing before the first page
    third_url = link(second, "next")
    assert third_url is not None
    third = admin_client.get(third_url).content.decode()
    assert rows(third) == names[100:120] and link(third, "next") is None
    previous_url = link(third, "previous")
    assert previous_url is not None
    previous = admin_client.get(previous_url).content.decode()
    assert rows(previous) == names[50:100]
    assert link(previous, "next") == third_url  # and forward again to where we came from
    both = admin_client.get(BASE + "locks/?alias=default&after=a&before=b").content.decode()
    assert "not both" in both and rows(both) == []


def test_queue_page_pages_by_score_both_ways(dashboard: Dashboard, admin_client: Client) -> None:
    q = dashboard.queue()
    ids = [f"t{i:03d}" for i in range(120)]
    q.enqueue_many([(i, {"i": i}) for i in ids])
    link = BASE + "queues/default/orders/"
    pages: list[list[str]] = []
    html = ""
    for _ in range(5):
        html = admin_client.get(link).content.decode()
        pages.append(rows(html))
        found = re.search(r'<a href="([^"]+)" class="next-page">', html)
        if not found:
            break
        link = unescape(found.group(1))
    assert [len(p) for p in pages] == [50, 50, 20]
    assert [row for page in pages for row in page] == ids
    assert "previous-page" in html and "next-page" not in html
    back = re.search(r'<a href="([^"]+)" class="previous-page">', html)
    assert back is not None
    previous = admin_client.get(unescape(back.group(1))).content.decode()
    assert rows(previous) == ids[50:100]
    last = admin_client.get(BASE + "queues/default/orders/?state=ready&last=1").content.decode()
    assert rows(last) == ids[70:]
    first = admin_client.get(BASE + "queues/default/orders/").content.decode()
    assert "previous-page" not in first and "rows 1\N{EN DASH}50 of 120" in first


def test_equal_scores_are_never_skipped(dashboard: Dashboard, admin_client: Client) -> None:
    """Keyset paging by score alone would skip ties; the page script pages by (score, id)."""
    q = dashboard.queue()
    raw = dashboard.target.raw
    pending, payloads = q.keys[0], q.keys[3]
    ids = [f"same-{i:03d}" for i in range(75)]
    raw.zadd(pending, {i: 1_000_000 for i in ids})
    raw.hset(payloads, mapping={i: "{}" for i in ids})
    dashboard.queues.register_queue("orders")
    first = admin_client.get(BASE + "queues/default/orders/").content.decode()
    link = re.search(r'<a href="([^"]+)" class="next-page">', first)
    assert link is not None and "after=1000000" in link.group(1)
    second = admin_client.get(unescape(link.group(1))).content.decode()
    assert rows(first) + rows(second) == ids
    back = re.search(r'<a href="([^"]+)" class="previous-page">', second)
    assert back is not None
    assert rows(admin_client.get(unescape(back.group(1))).content.decode()) == ids[:50]


def test_states_search_and_detail(dashboard: Dashboard, admin_client: Client) -> None:
    q = dashboard.queue()
    q.enqueue("now", {"when": "now"})
    q.enqueue("later", {"when": "later"}, delay=600)
    dead_task(q, "broken", error="ValueError: bad <input>")
    page = BASE + "queues/default/orders/"
    assert rows(admin_client.get(page + "?state=delayed").content.decode()) == ["later"]
    dead = admin_client.get(page + "?state=dead").content.decode()
    assert rows(dead) == ["broken"] and "ValueError: bad &lt;input&gt;" in dead
    assert re.search(r'Dead<span class="count">1</span>', dead)
    found = admin_client.get(page + "?q=later").content.decode()
    assert rows(found) == ["later"] and "<td>delayed</td>" in found
    missing = admin_client.get(page + "?q=nothing", follow=True).content.decode()
    assert "No task with the id “nothing”" in missing
    detail = admin_client.get(page + "tasks/later/").content.decode()
    assert "&quot;when&quot;: &quot;later&quot;" in detail and "Delayed" in detail


def test_odd_ids_and_names_round_trip(dashboard: Dashboard, admin_client: Client) -> None:
    """Slashes, spaces, quotes, unicode and HTML in ids and names survive links and forms."""
    q = dashboard.queue()
    for odd in NASTY:
        q.enqueue(odd, {"id": odd})
        html = admin_client.get(BASE + "queues/default/orders/?q=" + quote(odd)).content.decode()
        link = re.search(r'<td class="name"><a href="([^"]+)">', html)
        assert link is not None, odd
        detail = admin_client.get(unescape(link.group(1)))
        assert detail.status_code == 200, odd
        assert rows_detail_id(detail.content.decode()) == escape(odd)
        delete = re.search(r'<a class="deletelink" href="([^"]+)">', detail.content.decode())
        assert delete is not None
        confirm = admin_client.get(unescape(delete.group(1))).content.decode()
        score = re.search(r'name="score" value="(\d+)"', confirm)
        assert score is not None
        done = admin_client.post(unescape(delete.group(1)), {"where": "1", "score": score.group(1)})
        assert done.status_code == 302 and q.get(odd) is None, odd
        lock = dashboard.locks.lock(odd, ttl=30)
        assert lock.acquire(blocking=False)
        page = admin_client.get(BASE + "locks/?alias=default").content.decode()
        release = re.search(r'<a class="button release-link" href="([^"]+)">', page)
        assert release is not None
        confirmed = admin_client.get(unescape(release.group(1)))
        assert confirmed.status_code == 200 and escape(odd) in confirmed.content.decode()
        admin_client.post(unescape(release.group(1)), {"fence": str(lock.fence)})
        assert not lock.owned(), odd


def escape(text: str) -> str:
    from django.utils.html import escape as django_escape

    return str(django_escape(text))


def rows_detail_id(html: str) -> str:
    found = re.search(r'<th scope="row">Id</th><td class="name">(.*?)</td>', html)
    assert found is not None
    return found.group(1)


def test_gone_objects_say_so(dashboard: Dashboard, admin_client: Client) -> None:
    dashboard.queue().enqueue("real")  # the queue exists; the task does not
    task = admin_client.get(BASE + "queues/default/orders/tasks/ghost/", follow=True)
    assert task.status_code == 200 and "Task “ghost” is not in queue “orders” any more" in (
        task.content.decode()
    )
    lock = admin_client.get(BASE + "locks/default/ghost/release/", follow=True)
    assert lock.status_code == 200 and "Lock “ghost” is not held any more" in lock.content.decode()
    action = admin_client.post(BASE + "queues/default/orders/tasks/ghost/delete/", follow=True)
    assert "not in queue" in action.content.decode()
    assert admin_client.get(BASE + "queues/default/bad%7Bname/").status_code == 404
    assert admin_client.get(BASE + "queues/nope/orders/").status_code == 404
