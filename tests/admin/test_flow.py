"""The admin's pause/resume action and the paused flag and rate limit on its pages."""

from __future__ import annotations

import re
from collections.abc import Callable

from django.contrib.admin.models import CHANGE, LogEntry
from django.test import Client

from .conftest import BASE, Dashboard

Q = BASE + "queues/default/orders/"
StaffClient = Callable[..., Client]


def test_admin_pause_and_resume_are_confirmed_logged_and_shown(
    dashboard: Dashboard, admin_client: Client
) -> None:
    q = dashboard.queue()
    q.enqueue("t1", 1)
    page = admin_client.get(Q).content.decode()
    assert 'id="pause-queue"' in page and "queue-paused" not in page
    confirm = admin_client.get(Q + "flow/pause/").content.decode()
    assert "Workers claim none of its tasks" in confirm and q.is_paused() is False
    done = admin_client.post(Q + "flow/pause/", follow=True).content.decode()
    assert "Queue “orders” paused." in done and q.is_paused() is True
    assert 'id="queue-paused"' in done and 'id="resume-queue"' in done
    overview = admin_client.get(BASE).content.decode()
    assert re.search(r">orders</a> <strong[^>]*queue-paused[^>]*>paused<", overview)
    admin_client.post(Q + "flow/resume/", follow=True)
    assert q.is_paused() is False
    assert [(e.object_repr, e.action_flag, e.change_message) for e in LogEntry.objects.all()] == [
        ("queue orders", CHANGE, "Resume queue 'orders' on alias 'default'."),
        ("queue orders", CHANGE, "Pause queue 'orders' on alias 'default'."),
    ]


def test_admin_shows_the_rate_limit(fake: Dashboard, admin_client: Client) -> None:
    q = fake.queue()
    q.enqueue("t1", 1)
    q.set_rate_limit("100/m")
    assert "Rate limit: at most 100/m." in admin_client.get(Q).content.decode()
    assert "≤ 100/m" in admin_client.get(BASE).content.decode()


def test_admin_pause_needs_manage_tasks_and_csrf(
    fake: Dashboard, staff_client: StaffClient
) -> None:
    q = fake.queue()
    q.enqueue("t1", 1)
    viewer = staff_client("view_dashboard")
    assert 'id="pause-queue"' not in viewer.get(Q).content.decode()
    assert viewer.post(Q + "flow/pause/").status_code == 403
    manager = staff_client("view_dashboard", "manage_tasks", csrf=True)
    assert manager.post(Q + "flow/pause/").status_code == 403  # no CSRF token
    assert q.is_paused() is False
    assert manager.get(BASE + "queues/default/orders/flow/stop/").status_code == 404
    assert manager.get(BASE + "queues/default/never-used/flow/pause/").status_code == 404
