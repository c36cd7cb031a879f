"""Inputs and states that used to break a dashboard page, one test per defect."""

from __future__ import annotations

import json
import re
import time
from html import unescape
from typing import Any

from django.contrib.admin.models import LogEntry
from django.contrib.messages import constants
from django.test import Client, override_settings

from django_redislock.admin.common import url

from ..servers import RedisProcess
from .conftest import BASE, Dashboard, dead_task

Q = BASE + "queues/default/orders/"
HUGE = "9" * 5000  # int() refuses strings of more than 4,300 digits
CRAFTED = ["²", "--5", HUGE, "-" + HUGE, "1_000", " 7", "٣"]


def hidden(html: str, name: str) -> str:
    found = re.search(rf'name="{name}" value="([^"]*)"', html)
    assert found is not None, name
    return unescape(found.group(1))


def levels(response: Any) -> list[tuple[int, str]]:
    return [(m.level, m.message) for m in response.context["messages"]]


# -- 1, 2: a broken queue, a hung Redis ------------------------------------------------------


def test_a_queue_of_the_wrong_type_shows_its_own_error(
    dashboard: Dashboard, admin_client: Client
) -> None:
    dashboard.queue("fine").enqueue("x")
    broken = dashboard.queue("broken")
    broken.enqueue("y")
    client = dashboard.queues.client
    client.delete(broken.keys[0])
    client.sadd(broken.keys[0], "not a zset")
    page = admin_client.get(BASE)
    assert page.status_code == 200
    html = page.content.decode()
    row = re.search(r'<tr class="trouble queue-error">(.*?)</tr>', html, re.S)
    assert row is not None and ">broken<" in row.group(1) and "WRONGTYPE" in row.group(1)
    assert re.search(r">fine</a></th>\s*<td class=\"numeric\">1</td>", html)
    # its purge page says what is wrong instead of failing
    purge = admin_client.get(BASE + "queues/default/broken/purge/", follow=True)
    assert purge.status_code == 200 and "cannot be read" in purge.content.decode()


def test_a_hung_redis_costs_a_page_its_deadline(
    stopped_server: RedisProcess, admin_client: Client
) -> None:
    # a socket timeout far past the page's 0.5 s budget: a page that waited on the hung
    # server would take 30 s or more, one that kept its budget well under a few seconds
    # even on a busy machine (the bound below is the failure's, not a latency target)
    options = {"SOCKET_TIMEOUT": 30}
    params = {"LOCATION": stopped_server.url, "KEY_PREFIX": "adm", "OPTIONS": options}
    with override_settings(
        REDISLOCK_LOCKS={"default": params},
        REDISLOCK_QUEUES={"default": params},
        REDISLOCK_ADMIN_TIMEOUT=0.5,
    ):
        for page in (BASE, Q, BASE + "locks/", Q + "tasks/t1/", Q + "purge/"):
            started = time.monotonic()
            response = admin_client.get(page, follow=True)
            took = time.monotonic() - started
            assert response.status_code == 200, page
            assert took < 10.0, f"{page} took {took:.2f} s"
            assert "did not answer" in response.content.decode() or "earlier read" in (
                response.content.decode()
            ), page


# -- 3: crafted numbers ----------------------------------------------------------------------


def test_parse_int_is_strict() -> None:
    from django_redislock.admin.common import parse_int

    assert parse_int("17") == 17 and parse_int("-3") == -3
    for raw in [*CRAFTED, "", "-", "1.5", "0x10", None]:
        assert parse_int(raw) is None, raw
    assert parse_int("4", 1, 3) is None and parse_int("0", 1) is None and parse_int("2", 1, 3) == 2


def test_crafted_numbers_never_give_a_500(dashboard: Dashboard, admin_client: Client) -> None:
    q = dashboard.queue()
    q.enqueue("t1", {"n": 1})
    confirm = admin_client.get(Q + "tasks/t1/delete/").content.decode()
    score = hidden(confirm, "score")
    for raw in CRAFTED:
        for direction in ("after", "before"):
            page = admin_client.get(Q, {"state": "ready", direction: raw, "id": "t1"})
            assert page.status_code == 200, (direction, raw[:10])
        for form in ({"where": raw, "score": score}, {"where": "1", "score": raw}):
            done = admin_client.post(Q + "tasks/t1/delete/", form, follow=True)
            assert done.status_code == 200 and "nothing was done" in done.content.decode()
        bulk = admin_client.post(
            Q + "actions/",
            {"state": "ready", "action": "run", "selected": [f"{raw}:t1"]},
            follow=True,
        )
        assert bulk.status_code == 200
        purge = admin_client.post(Q + "purge/", {"count": raw}, follow=True)
        assert purge.status_code == 200 and "nothing was done" in purge.content.decode()
    assert q.get("t1") is not None


def test_the_hidden_where_field_is_checked(dashboard: Dashboard, admin_client: Client) -> None:
    q = dashboard.queue()
    q.enqueue("t1", {"n": 1})
    score = hidden(admin_client.get(Q + "tasks/t1/delete/").content.decode(), "score")
    for where in ("0", "4", "5", "-1"):  # 4-6 would name the payload, attempts, error hashes
        done = admin_client.post(
            Q + "tasks/t1/delete/", {"where": where, "score": score}, follow=True
        )
        html = done.content.decode()
        assert done.status_code == 200 and "nothing was done" in html
        assert "WRONGTYPE" not in html and "Lua" not in html
    assert q.get("t1") is not None


# -- 4: row numbers of the Delayed tab -------------------------------------------------------


def test_delayed_rows_are_numbered_within_their_state(
    dashboard: Dashboard, admin_client: Client
) -> None:
    q = dashboard.queue()
    q.enqueue_many([(f"r{i}", i) for i in range(7)])
    q.enqueue_many([(f"d{i:02}", i) for i in range(60)], delay=600)
    html = admin_client.get(Q, {"state": "delayed"}).content.decode()
    assert "rows 1\u201350 of 60" in html
    last = admin_client.get(Q, {"state": "delayed", "last": "1"}).content.decode()
    assert "rows 11\u201360 of 60" in last


# -- 5: dot segments and newlines ------------------------------------------------------------


def test_dot_names_and_ids_are_reachable(dashboard: Dashboard, admin_client: Client) -> None:
    for name in (".", ".."):
        q = dashboard.queue(name)
        q.enqueue("..", {"n": 1})
        q.enqueue(".", {"n": 2})
        page_url = url("queue", "default", name)
        for link in (
            page_url,
            url("task", "default", name, ".."),
            url("task", "default", name, "."),
        ):
            assert "/./" not in link and "/../" not in link, link
        page = admin_client.get(page_url)
        assert page.status_code == 200 and f"Queue “{name}”" in page.content.decode()
        task = admin_client.get(url("task", "default", name, ".."))
        assert task.status_code == 200 and "Task “..”" in task.content.decode()


def test_bulk_actions_work_on_ids_with_a_newline(
    dashboard: Dashboard, admin_client: Client
) -> None:
    q = dashboard.queue()
    q.enqueue("two\nlines", {"n": 1})
    q.enqueue("plain", {"n": 2})
    html = admin_client.get(Q).content.decode()
    values = [unescape(v) for v in re.findall(r'name="selected" value="([^"]+)"', html)]
    assert values and all("\n" not in value for value in values)
    posted = [value.replace("\n", "\r\n") for value in values]  # what a browser sends
    form = {"state": "ready", "action": "delete", "selected": posted, "confirm": "yes"}
    admin_client.post(Q + "actions/", form)
    assert q.get("two\nlines") is None and q.get("plain") is None


# -- 6: the task page caps the payload -------------------------------------------------------


def test_the_task_page_caps_the_payload_and_offers_it_whole(
    dashboard: Dashboard, admin_client: Client
) -> None:
    q = dashboard.queue()
    q.enqueue("big", {"small": 1})
    # another producer wrote a payload far over this app's own MAX_PAYLOAD_BYTES
    dashboard.queues.client.hset(q.keys[3], "big", json.dumps({"blob": "x" * 2_000_000}))
    page = admin_client.get(Q + "tasks/big/")
    html = page.content.decode()
    assert page.status_code == 200 and len(html) < 200_000
    assert 'id="payload-truncated"' in html
    link = hidden_link(html, "payload-download")
    whole = admin_client.get(link)
    assert whole.status_code == 200 and whole["Content-Disposition"].startswith("attachment")
    assert len(whole.content) > 2_000_000 and b'"blob"' in whole.content


def hidden_link(html: str, id: str) -> str:
    found = re.search(rf'<a href="([^"]+)" id="{id}"', html)
    assert found is not None, id
    return unescape(found.group(1))


# -- 7: small things -------------------------------------------------------------------------


def test_a_missing_queue_is_a_404_and_logs_nothing(
    dashboard: Dashboard, admin_client: Client
) -> None:
    assert admin_client.get(BASE + "queues/default/never-used/").status_code == 404
    assert admin_client.get(BASE + "queues/default/never-used/purge/").status_code == 404
    for action in ("purge", "requeue-dead"):
        done = admin_client.post(BASE + f"queues/default/never-used/{action}/", {"count": "0"})
        assert done.status_code == 404
    assert LogEntry.objects.count() == 0


def test_a_cursor_past_the_end_links_back(dashboard: Dashboard, admin_client: Client) -> None:
    q = dashboard.queue()
    q.enqueue_many([(f"t{i}", i) for i in range(3)])
    page = admin_client.get(Q, {"state": "ready", "after": str(2**52), "id": "zzz"})
    html = page.content.decode()
    assert 'class="first-page"' in html and 'class="previous-page"' in html
    previous = hidden_link_class(html, "previous-page")
    assert "rows 1\u20133 of 3" in admin_client.get(previous).content.decode()


def hidden_link_class(html: str, cls: str) -> str:
    found = re.search(rf'<a href="([^"]+)" class="{cls}"', html)
    assert found is not None, cls
    return unescape(found.group(1))


def test_an_ended_lease_is_not_a_negative_countdown(
    dashboard: Dashboard, admin_client: Client
) -> None:
    q = dashboard.queue()
    q.enqueue("t", 1)
    assert q.pop(1, lease=0.05)
    time.sleep(0.2)
    html = admin_client.get(BASE).content.decode()
    assert re.search(r"ended [\d.]+ s ago", html) and "-0." not in html


def test_times_carry_their_timezone(dashboard: Dashboard, admin_client: Client) -> None:
    dashboard.queue().enqueue("t", 1)
    with override_settings(TIME_ZONE="Europe/Paris"):
        for page in (Q, Q + "tasks/t/"):
            assert re.search(r"\d\d:\d\d:\d\d CES?T", admin_client.get(page).content.decode())


def test_purge_is_styled_as_dangerous(dashboard: Dashboard, admin_client: Client) -> None:
    dashboard.queue().enqueue("t", 1)
    html = admin_client.get(Q + "purge/").content.decode()
    assert re.search(r'<input type="submit" class="danger" id="confirm-purge"', html)


def test_a_missing_permission_gets_a_styled_403(fake: Dashboard, staff_client: Any) -> None:
    fake.queue().enqueue("t", 1)
    viewer = staff_client("view_dashboard")
    denied = viewer.get(Q + "purge/")
    html = denied.content.decode()
    assert denied.status_code == 403 and 'id="denied"' in html and "breadcrumbs" in html


def test_recent_actions_link_to_the_object_and_the_audit_trail_lists_them(
    dashboard: Dashboard, admin_client: Client
) -> None:
    q = dashboard.queue("with:colon")
    q.enqueue("a:b", {"n": 1}, delay=600)
    task_page = url("task", "default", "with:colon", "a:b")
    confirm = admin_client.get(task_page + "run/").content.decode()
    admin_client.post(task_page + "run/", {"where": "1", "score": hidden(confirm, "score")})
    (entry,) = LogEntry.objects.all()
    link = entry.get_admin_url()
    assert link, "the log entry has no link"
    opened = admin_client.get(link)
    assert opened.status_code == 302 and opened["Location"] == task_page
    index = admin_client.get("/admin/").content.decode()
    assert f'href="{link}"' in index
    audit = admin_client.get(BASE + "audit/").content.decode()
    assert "Run now: task of queue" in audit and f'href="{link}"' in audit


# -- 8: purge, messages, previews ------------------------------------------------------------


def test_purge_deletes_only_what_was_confirmed(dashboard: Dashboard, admin_client: Client) -> None:
    q = dashboard.queue()
    q.enqueue_many([(f"t{i}", i) for i in range(18)])
    confirm = admin_client.get(Q + "purge/").content.decode()
    count = hidden(confirm, "count")
    assert count == "18"
    q.enqueue_many([(f"late{i}", i) for i in range(40)])  # arrive before the click
    done = admin_client.post(Q + "purge/", {"count": count}, follow=True)
    assert "holds more tasks than the 18 you confirmed" in done.content.decode()
    assert q.stats()["ready"] == 58 and LogEntry.objects.count() == 0
    fresh = hidden(admin_client.get(Q + "purge/").content.decode(), "count")
    admin_client.post(Q + "purge/", {"count": fresh})
    assert q.stats()["ready"] == 0


def test_purge_in_chunks_never_exceeds_the_confirmed_count(dashboard: Dashboard) -> None:
    from django_redislock.admin.data import purge_confirmed

    q = dashboard.queue()
    q.enqueue_many([(f"t{i}", i) for i in range(25)])
    assert purge_confirmed(q, 10, chunk=4) == (0, True)  # 25 > 10: nothing deleted
    dead_task(q, "dead")
    assert purge_confirmed(q, 26, chunk=4) == (26, False)
    assert q.stats()["ready"] == 0 and q.stats()["dead"] == 0


def test_purge_of_a_claimed_task_leaves_no_claim_behind(dashboard: Dashboard) -> None:
    from django_redislock.admin.data import purge_confirmed

    q = dashboard.queue()
    q.enqueue("claimed", 1)
    assert len(q.pop(1)) == 1
    claims = q.claims_key
    assert q.backend.client.hexists(claims, "claimed")
    assert purge_confirmed(q, 1) == (1, False)
    assert not q.backend.client.hexists(claims, "claimed")


def test_no_task_with_the_id_is_a_warning(dashboard: Dashboard, admin_client: Client) -> None:
    dashboard.queue().enqueue("t", 1)
    page = admin_client.get(Q, {"q": "nope"})
    assert (constants.WARNING, "No task with the id “nope” in this queue.") in levels(page)


def test_previews_show_text_not_escapes(dashboard: Dashboard, admin_client: Client) -> None:
    dashboard.queue().enqueue("t", {"name": "café 😀 \\u00e9"})
    html = admin_client.get(Q).content.decode()
    assert "café 😀" in html and "\\u00e9" in html  # an escaped backslash stays literal
    assert "\\u00e9\\" not in html and "caf\\u00e9" not in html


# -- live pages ------------------------------------------------------------------------------


def test_live_polls_get_the_regions_as_json(dashboard: Dashboard, admin_client: Client) -> None:
    q = dashboard.queue()
    q.enqueue("first", 1)
    page = admin_client.get(Q).content.decode()
    assert 'data-regions="state-tabs task-rows keyset queue-trends"' in page
    q.enqueue("second", 2)
    live = admin_client.get(Q, {"live": "1"})
    assert live["Content-Type"] == "application/json"
    regions = live.json()["regions"]
    assert set(regions) == {"state-tabs", "task-rows", "keyset", "queue-trends"}
    assert ">second</a>" in regions["task-rows"] and "<tbody" not in regions["task-rows"]
    overview = admin_client.get(BASE, {"live": "1"}).json()["regions"]
    assert (
        set(overview) == {"lock-aliases", "queue-aliases"}
        and ">orders</a>" in overview["queue-aliases"]
    )
    task = admin_client.get(Q + "tasks/first/", {"live": "1"}).json()["regions"]
    assert "first" in task["task-fields"]
    q.remove("first")
    gone = admin_client.get(Q + "tasks/first/", {"live": "1"})
    assert "not in the queue any more" in gone.json()["gone"]
    later = admin_client.get(Q)
    assert not any("not in queue" in m for _, m in levels(later))  # none left for a later page
    viewer_denied = Client().get(Q, {"live": "1"})
    assert viewer_denied.status_code == 302  # the login page, as for the page itself


# -- operator actions ------------------------------------------------------------------------


def test_return_expired_leases_to_ready(
    dashboard: Dashboard, admin_client: Client, staff_client: Any
) -> None:
    q = dashboard.queue()
    q.enqueue_many([(f"t{i}", i) for i in range(4)])
    assert len(q.pop(3, lease=0.05)) == 3  # a worker took three and died
    time.sleep(0.2)
    viewer = staff_client("view_dashboard")
    assert viewer.get(Q + "return-expired/").status_code == 403
    assert viewer.post(Q + "return-expired/", {"count": "3"}).status_code == 403
    assert q.stats()["in_flight"] == 3
    html = admin_client.get(Q, {"state": "in_flight"}).content.decode()
    assert 'id="return-expired"' in html
    confirm = admin_client.get(Q + "return-expired/").content.decode()
    assert "3 in-flight task(s) whose lease has ended" in confirm
    assert q.stats()["in_flight"] == 3  # GET changes nothing
    done = admin_client.post(
        Q + "return-expired/", {"count": hidden(confirm, "count")}, follow=True
    )
    assert "3 task(s) with an expired lease returned" in done.content.decode()
    stats = q.stats()
    assert stats["in_flight"] == 0 and stats["ready"] == 4
    (entry,) = LogEntry.objects.all()
    assert "Returned expired leases" in entry.change_message


def test_find_a_task_id_in_every_queue(dashboard: Dashboard, admin_client: Client) -> None:
    dashboard.queue("orders").enqueue("order-7", 1)
    dashboard.queue("emails").enqueue("order-7", 2, delay=600)
    dashboard.queue("other").enqueue("order-8", 3)
    html = admin_client.get(BASE, {"find": "order-7"}).content.decode()
    found = html.split('id="found"', 1)[1].split("</table>", 1)[0]
    assert found.count('<tr><th scope="row">') == 2
    assert f'href="{url("task", "default", "emails", "order-7")}">emails</a>' in found
    assert ">delayed<" in found and ">ready<" in found and ">other<" not in found
    none = admin_client.get(BASE, {"find": "nope"}).content.decode()
    assert "No queue holds a task with this id." in none


def test_an_action_over_a_whole_state(dashboard: Dashboard, admin_client: Client) -> None:
    from django_redislock.admin import actions

    q = dashboard.queue()
    q.enqueue_many([(f"r{i}", i) for i in range(3)])
    q.enqueue_many([(f"d{i:03}", i) for i in range(120)], delay=600)
    form = {"state": "delayed", "action": "run", "scope": "all"}
    confirm = admin_client.post(Q + "actions/", form).content.decode()
    assert "all 120 delayed task(s)" in confirm and q.stats()["delayed"] == 120
    q.enqueue_many([(f"late{i}", i) for i in range(5)], delay=600)  # arrive before the click
    old = actions.BULK_PAGE
    actions.BULK_PAGE = 50  # several pages
    try:
        done = admin_client.post(
            Q + "actions/",
            {**form, "confirm": "yes", "count": hidden(confirm, "count")},
            follow=True,
        )
    finally:
        actions.BULK_PAGE = old
    assert "120 task(s) made due now" in done.content.decode()
    stats = q.stats()
    assert stats["delayed"] == 5 and stats["ready"] == 123  # never more than confirmed
    (entry,) = LogEntry.objects.all()
    assert "120 task(s) made due now (of 120 confirmed)" in entry.change_message
    refused = admin_client.post(
        Q + "actions/", {"state": "delayed", "action": "requeue", "scope": "all"}, follow=True
    )
    assert "Pick an action that applies" in refused.content.decode()


def test_find_ids_by_prefix(dashboard: Dashboard, admin_client: Client) -> None:
    from django_redislock.admin import search

    q = dashboard.queue()
    q.enqueue_many([(f"order-{i:03}", i) for i in range(30)])
    q.enqueue_many([(f"mail-{i}", i) for i in range(30)])
    q.enqueue("order-*x", 1, delay=600)  # a glob special in an id matches only itself
    dead_task(q, "order-dead")
    html = admin_client.get(Q, {"q": "order-", "match": "prefix"}).content.decode()
    shown = set(re.findall(r">(order-[^<]*)</a>", html))
    assert len(shown) == 32 and "order-dead" in shown and "order-*x" in shown
    assert not re.search(r">mail-", html) and 'id="scan-more"' not in html
    star = admin_client.get(Q, {"q": "order-*", "match": "prefix"}).content.decode()
    assert set(re.findall(r">(order-[^<]*)</a>", star)) == {"order-*x"}
    # a small scan budget makes the search page through the sets
    old = search.PREFIX_SCAN_CALLS, search.PREFIX_SCAN_COUNT, search.PREFIX_HITS
    search.PREFIX_SCAN_CALLS, search.PREFIX_SCAN_COUNT, search.PREFIX_HITS = 1, 10, 5
    try:
        seen: set[str] = set()
        page = admin_client.get(Q, {"q": "order-", "match": "prefix"}).content.decode()
        for _ in range(60):
            seen |= set(re.findall(r">(order-[^<]*)</a>", page))
            more = re.search(r'<a href="([^"]+)" id="scan-more">', page)
            if more is None:
                break
            page = admin_client.get(unescape(more.group(1))).content.decode()
        assert len(seen) == 32
    finally:
        search.PREFIX_SCAN_CALLS, search.PREFIX_SCAN_COUNT, search.PREFIX_HITS = old
    nothing = admin_client.get(Q, {"q": "zzz", "match": "prefix"})
    assert (constants.WARNING, "No task id starts with “zzz” in this queue.") in levels(nothing)


def test_locks_filter_by_kind_and_holder_and_sort_by_ttl(
    dashboard: Dashboard, admin_client: Client
) -> None:
    held = [dashboard.locks.lock(f"m{i}", ttl=60 + i) for i in range(3)]
    for lock in held:
        assert lock.acquire(blocking=False)
    reader = dashboard.locks.read_write_lock("catalog", ttl=30).read()
    assert reader.acquire(blocking=False)
    try:
        by_kind = admin_client.get(BASE + "locks/", {"kind": "read"}).content.decode()
        assert "1 match on" in by_kind and ">catalog<" in by_kind and ">m0<" not in by_kind
        by_ttl = admin_client.get(BASE + "locks/", {"sort": "ttl"}).content.decode()
        order = re.findall(r'<td class="name">([^<]+)</td>', by_ttl)
        assert order == ["catalog", "m0", "m1", "m2"]  # soonest expiry first
        nobody = admin_client.get(BASE + "locks/", {"holder": "no-such-host"}).content.decode()
        assert "0 match on" in nobody
        import socket

        mine = admin_client.get(BASE + "locks/", {"holder": socket.gethostname()}).content.decode()
        assert "4 match on" in mine
        junk = admin_client.get(BASE + "locks/", {"kind": "x", "sort": "y", "page": "²"})
        assert junk.status_code == 200 and "4 held on" in junk.content.decode()
    finally:
        for lock in held:
            lock.release()
        reader.release()
