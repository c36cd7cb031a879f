"""The admin's cancel action (issue 29, items 3 and 6): a queued task is removed, a running
one's worker is asked to stop it; POST with CSRF, the task-management permission, a
``LogEntry``; one task from its page, or a selection from the queue page."""

from __future__ import annotations

import re
from collections.abc import Callable
from html import unescape

from django.contrib.admin.models import CHANGE, LogEntry
from django.test import Client

from django_redislock.queue import history

from .conftest import BASE, Dashboard, dead_task

Q = BASE + "queues/default/orders/"
StaffClient = Callable[..., Client]


def hidden(html: str, name: str) -> str:
    found = re.search(rf'name="{name}" value="([^"]*)"', html)
    assert found is not None, name
    return unescape(found.group(1))


def entries() -> list[tuple[str, int, str]]:
    return [(e.object_repr, e.action_flag, e.change_message) for e in LogEntry.objects.all()]


def confirm_and_post(client: Client, url: str) -> str:
    confirm = client.get(url).content.decode()
    form = {"where": hidden(confirm, "where"), "score": hidden(confirm, "score")}
    return client.post(url, form, follow=True).content.decode()


def test_cancel_removes_a_queued_task_and_records_it(
    dashboard: Dashboard, admin_client: Client
) -> None:
    q = dashboard.queue()
    q.enqueue("later", {"x": 1}, delay=3600)
    q.enqueue("other", {"x": 2})
    page = admin_client.get(Q + "tasks/later/").content.decode()
    assert 'id="cancel-task"' in page and Q + "tasks/later/cancel/" in page
    confirm = admin_client.get(Q + "tasks/later/cancel/").content.decode()
    assert "removed from the queue and never runs" in confirm
    assert q.get("later") is not None  # a GET changes nothing
    done = confirm_and_post(admin_client, Q + "tasks/later/cancel/")
    assert "1 task(s) cancelled" in done
    assert q.get("later") is None and q.get("other") is not None
    [run] = history.read(q, "later")
    assert run.outcome == "cancelled" and "admin" in run.error
    [(name, flag, message)] = entries()
    assert name == "task later (orders)" and flag == CHANGE and message.startswith("Cancel")


def test_cancel_of_a_running_task_asks_its_worker(
    dashboard: Dashboard, admin_client: Client
) -> None:
    q = dashboard.queue()
    q.enqueue("busy", 1)
    [task] = q.pop(1)
    confirm = admin_client.get(Q + "tasks/busy/cancel/").content.decode()
    assert "A worker is running it" in confirm
    done = confirm_and_post(admin_client, Q + "tasks/busy/cancel/")
    assert "1 running task(s) asked to stop" in done
    assert q.get("busy").state == "in_flight"  # the worker ends the run, not the admin
    q.extend_lease(task)  # the worker's next renewal hears of it
    assert task.cancel_requested is True
    [(name, flag, message)] = entries()
    assert name == "task busy (orders)" and flag == CHANGE and "to stop it" in message


def test_cancel_does_not_apply_to_a_dead_task(dashboard: Dashboard, admin_client: Client) -> None:
    q = dashboard.queue()
    dead_task(q, "gone")
    assert "does not apply" in admin_client.get(Q + "tasks/gone/cancel/").content.decode()
    assert 'id="cancel-task"' not in admin_client.get(Q + "tasks/gone/").content.decode()
    assert q.get("gone").state == "dead" and entries() == []


def test_cancel_of_a_task_that_finished_meanwhile_says_so(
    dashboard: Dashboard, admin_client: Client
) -> None:
    q = dashboard.queue()
    q.enqueue("quick", 1)
    confirm = admin_client.get(Q + "tasks/quick/cancel/").content.decode()
    [task] = q.pop(1)
    assert q.ack(task) == 1  # it ran and finished before the operator confirmed
    form = {"where": hidden(confirm, "where"), "score": hidden(confirm, "score")}
    response = admin_client.post(Q + "tasks/quick/cancel/", form, follow=True)
    assert "is not in queue “orders” any more" in response.content.decode()
    assert entries() == []


def test_cancel_selected_from_the_queue_page(dashboard: Dashboard, admin_client: Client) -> None:
    q = dashboard.queue()
    q.enqueue_many([("a", 1), ("b", 2), ("c", 3)])
    page = admin_client.get(Q + "?state=ready").content.decode()
    assert '<option value="cancel">Cancel selected</option>' in page
    picked = [f"{t.score}:{t.id}" for t in q.tasks("ready", 10) if t.id in ("a", "c")]
    response = admin_client.post(
        Q + "actions/",
        {"state": "ready", "action": "cancel", "selected": picked},
        follow=True,
    )
    assert "2 task(s) cancelled" in response.content.decode()
    assert [t.id for t in q.tasks("ready", 10)] == ["b"]
    assert sorted(name for name, _, _ in entries()) == ["task a (orders)", "task c (orders)"]


def test_cancel_needs_the_manage_permission_and_csrf(
    dashboard: Dashboard, staff_client: StaffClient
) -> None:
    q = dashboard.queue()
    q.enqueue("kept", 1)
    viewer = staff_client("view_dashboard")
    assert viewer.get(Q + "tasks/kept/cancel/").status_code == 403
    assert viewer.post(Q + "tasks/kept/cancel/", {"where": "1", "score": "0"}).status_code == 403
    assert 'id="cancel-task"' not in viewer.get(Q + "tasks/kept/").content.decode()
    manager = staff_client("view_dashboard", "manage_tasks", csrf=True)
    confirm = manager.get(Q + "tasks/kept/cancel/").content.decode()
    form = {"where": hidden(confirm, "where"), "score": hidden(confirm, "score")}
    assert manager.post(Q + "tasks/kept/cancel/", form).status_code == 403  # no CSRF token
    assert q.get("kept") is not None
    form["csrfmiddlewaretoken"] = hidden(confirm, "csrfmiddlewaretoken")
    assert manager.post(Q + "tasks/kept/cancel/", form).status_code == 302
    assert q.get("kept") is None
    [entry] = LogEntry.objects.all()
    assert entry.user.username.startswith("staff-") and entry.object_repr == "task kept (orders)"
