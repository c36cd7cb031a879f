"""The dashboard pages on fakeredis, a real server and a real cluster."""

from __future__ import annotations

from django.test import Client

from .conftest import Dashboard

BASE = "/admin/django_redislock/dashboard/"


def test_overview_lists_locks_and_queues(dashboard: Dashboard, admin_client: Client) -> None:
    q = dashboard.queue()
    q.enqueue_many([("a", {"n": 1}), ("b", {"n": 2})])
    q.enqueue("later", {"n": 3}, delay=600)
    dashboard.queue("mail").enqueue("m1", None)
    with dashboard.locks.lock("order:1", ttl=30):
        response = admin_client.get(BASE)
    assert response.status_code == 200
    text = response.content.decode()
    assert "orders" in text and "mail" in text
    assert '<meta http-equiv="refresh"' in text
