"""Every dashboard action's effect in Redis, its LogEntry and its refusal of stale forms."""

from __future__ import annotations

import re
from html import unescape

import pytest
from django.contrib.admin.models import CHANGE, DELETION, LogEntry
from django.test import Client

from django_redislock.exceptions import LockLost

from .conftest import BASE, Dashboard, dead_task

Q = BASE + "queues/default/orders/"


def hidden(html: str, name: str) -> str:
    found = re.search(rf'name="{name}" value="([^"]*)"', html)
    assert found is not None, name
    return unescape(found.group(1))


def entries() -> list[tuple[str, int, str]]:
    return [(e.object_repr, e.action_flag, e.change_message) for e in LogEntry.objects.all()]


def test_force_release_bumps_the_fence_and_is_logged(
    dashboard: Dashboard, admin_client: Client
) -> None:
    lock = dashboard.locks.lock("order:42", ttl=30)
    assert lock.acquire(blocking=False)
    old = lock.fence
    url = BASE + "locks/default/order%3A42/release/"
    confirm = admin_client.get(url).content.decode()
    assert "Yes, release it" in confirm and hidden(confirm, "fence") == str(old)
    response = admin_client.post(url, {"fence": str(old)}, follow=True)
    assert "Released lock “order:42”" in response.content.decode()
    with pytest.raises(LockLost):
        lock.ensure_held()
    again = dashboard.locks.lock("order:42", ttl=30)
    assert again.acquire(blocking=False) and again.fence > old + 1  # the release bumped it
    again.release()
    [(name, flag, message)] = entries()
    assert name == "lock order:42" and flag == CHANGE and f"fence {old}" in message
    index = admin_client.get("/admin/")  # "Recent actions" lists it, without a broken link
    assert index.status_code == 200 and "lock order:42" in index.content.decode()


def test_stale_release_form_is_refused(dashboard: Dashboard, admin_client: Client) -> None:
    first = dashboard.locks.lock("order:7", ttl=30)
    assert first.acquire(blocking=False)
    seen = hidden(
        admin_client.get(BASE + "locks/default/order%3A7/release/").content.decode(), "fence"
    )
    dashboard.locks.force_release("order:7")  # someone else released it meanwhile ...
    second = dashboard.locks.lock("order:7", ttl=30)
    assert second.acquire(blocking=False)  # ... and a new holder took it
    response = admin_client.post(
        BASE + "locks/default/order%3A7/release/", {"fence": seen}, follow=True
    )
    assert "changed hands since you looked" in response.content.decode()
    assert second.owned() and entries() == []
    second.release()


def test_run_now_makes_a_delayed_task_due(dashboard: Dashboard, admin_client: Client) -> None:
    q = dashboard.queue()
    q.enqueue("later", {"x": 1}, delay=3600)
    url = Q + "tasks/later/run/"
    confirm = admin_client.get(url).content.decode()
    assert "becomes due now" in confirm
    admin_client.post(url, {"where": hidden(confirm, "where"), "score": hidden(confirm, "score")})
    task = q.get("later")
    assert task is not None and task.state == "ready"
    assert entries() == [("task later (orders)", CHANGE, entries()[0][2])]


def test_run_now_does_not_apply_in_flight(dashboard: Dashboard, admin_client: Client) -> None:
    q = dashboard.queue()
    q.enqueue("busy", 1)
    q.pop(1)
    task = q.get("busy")
    assert "does not apply" in admin_client.get(Q + "tasks/busy/run/").content.decode()
    response = admin_client.post(
        Q + "tasks/busy/run/", {"where": "2", "score": str(task.score)}, follow=True
    )
    assert "does not apply" in response.content.decode()
    assert q.get("busy").state == "in_flight" and entries() == []


def test_requeue_one_selected_and_all_dead(dashboard: Dashboard, admin_client: Client) -> None:
    q = dashboard.queue()
    for i in range(4):
        dead_task(q, f"d{i}")
    # one, from the task page
    detail = admin_client.get(Q + "tasks/d0/").content.decode()
    assert 'id="requeue-button"' in detail
    admin_client.post(Q + "tasks/d0/requeue/", {"where": "3", "score": hidden(detail, "score")})
    assert q.get("d0").state == "ready" and q.get("d0").attempts == 0
    # selected, from the dead list
    dead = admin_client.get(Q + "?state=dead").content.decode()
    tokens = [unescape(v) for v in re.findall(r'name="selected" value="([^"]+)"', dead)]
    assert len(tokens) == 3
    admin_client.post(
        Q + "actions/", {"state": "dead", "action": "requeue", "selected": tokens[:1]}
    )
    assert q.stats()["dead"] == 2
    # all dead, confirmed with the count
    confirm = admin_client.get(Q + "requeue-dead/").content.decode()
    assert "all 2 dead task(s)" in confirm
    response = admin_client.post(Q + "requeue-dead/", {"count": "2"}, follow=True)
    assert "2 task(s) requeued" in response.content.decode()
    assert q.stats()["dead"] == 0 and q.stats()["ready"] == 4
    names = [name for name, _, _ in entries()]
    assert sorted(names) == [
        "queue orders",
        "task d0 (orders)",
        f"task {tokens[0].split(':', 1)[1]} (orders)",
    ]


def test_delete_one_and_selected_with_confirmation(
    dashboard: Dashboard, admin_client: Client
) -> None:
    q = dashboard.queue()
    q.enqueue_many([(f"t{i}", {"i": i}) for i in range(5)])
    confirm = admin_client.get(Q + "tasks/t0/delete/").content.decode()
    assert "Yes, delete" in confirm and q.get("t0") is not None  # GET changes nothing
    admin_client.post(Q + "tasks/t0/delete/", {"where": "1", "score": hidden(confirm, "score")})
    assert q.get("t0") is None
    page = admin_client.get(Q).content.decode()
    tokens = [unescape(v) for v in re.findall(r'name="selected" value="([^"]+)"', page)][:2]
    first = admin_client.post(
        Q + "actions/", {"state": "ready", "action": "delete", "selected": tokens}
    )
    assert first.status_code == 200 and "Yes, delete them" in first.content.decode()
    assert q.stats()["ready"] == 4  # the first POST only asked
    admin_client.post(
        Q + "actions/", {"state": "ready", "action": "delete", "selected": tokens, "confirm": "yes"}
    )
    assert q.stats()["ready"] == 2 and q.get("t1") is None and q.get("t2") is None
    assert [flag for _, flag, _ in entries()] == [DELETION] * 3
    # the deleted tasks' enqueue times went with their payloads
    assert {k.decode() for k in q.backend.client.hkeys(q.enqueued_key)} == {"t3", "t4"}


def test_deleting_an_in_flight_task_leaves_none_of_its_fields(
    dashboard: Dashboard, admin_client: Client
) -> None:
    q = dashboard.queue()
    q.enqueue("busy", {"v": 1})
    (claimed,) = q.pop(1)
    confirm = admin_client.get(Q + "tasks/busy/delete/").content.decode()
    admin_client.post(Q + "tasks/busy/delete/", {"where": "2", "score": hidden(confirm, "score")})
    assert q.get("busy") is None
    client = q.backend.client
    for key in (q.keys[3], q.keys[4], q.keys[5], q.claims_key, q.enqueued_key):
        assert not client.hexists(key, "busy"), key  # its claim token too
    assert q.ack(claimed) == 0  # the run that held it finds nothing to acknowledge


def test_stale_task_forms_are_refused(dashboard: Dashboard, admin_client: Client) -> None:
    q = dashboard.queue()
    q.enqueue("job", {"v": 1}, delay=600)
    confirm = admin_client.get(Q + "tasks/job/delete/").content.decode()
    q.enqueue("job", {"v": 2}, delay=900, replace=True)  # rescheduled meanwhile
    response = admin_client.post(
        Q + "tasks/job/delete/", {"where": "1", "score": hidden(confirm, "score")}, follow=True
    )
    assert "changed since you looked" in response.content.decode()
    assert q.get("job") is not None and entries() == []
    bulk = admin_client.post(
        Q + "actions/",
        {"state": "delayed", "action": "run", "selected": [f"{hidden(confirm, 'score')}:job"]},
        follow=True,
    )
    assert "changed since you looked" in bulk.content.decode() and q.get("job").state == "delayed"


def test_purge_names_the_count_and_empties_the_queue(
    dashboard: Dashboard, admin_client: Client
) -> None:
    q = dashboard.queue()
    q.enqueue_many([(f"t{i}", i) for i in range(30)])
    q.enqueue("later", 1, delay=60)
    dead_task(q, "dead")
    confirm = admin_client.get(Q + "purge/").content.decode()
    assert "all 32 task(s)" in confirm and "30 ready, 1 delayed, 0 in flight and 1 dead" in confirm
    assert q.stats()["ready"] == 30
    response = admin_client.post(Q + "purge/", {"count": "32"}, follow=True)
    assert "32 task(s) deleted" in response.content.decode()
    stats = q.stats()
    assert stats["ready"] + stats["delayed"] + stats["in_flight"] + stats["dead"] == 0
    assert entries()[0][:2] == ("queue orders", DELETION)
