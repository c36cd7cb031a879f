"""The admin's semaphore lookup (issue 30): semaphores are in no index, so the locks page
links to a lookup by name that shows permits held (id, deadline) and waiters, read with
one bounded pipeline; names are escaped."""

from __future__ import annotations

import threading
import time
from html import unescape
from urllib.parse import urlencode

import pytest
from django.test import Client

from .conftest import BASE, Dashboard

pytestmark = pytest.mark.django_db(transaction=True)

PAGE = BASE + "locks/semaphore/"


def look(client: Client, name: str) -> str:
    response = client.get(PAGE + "?" + urlencode({"alias": "default", "name": name}))
    assert response.status_code == 200
    return response.content.decode()


def test_the_locks_page_links_to_the_lookup(dashboard: Dashboard, admin_client: Client) -> None:
    page = admin_client.get(BASE + "locks/").content.decode()
    assert 'id="semaphore-link"' in page and PAGE in page


def test_lookup_shows_permits_and_a_waiter(dashboard: Dashboard, admin_client: Client) -> None:
    name = 'exports:<b>"t&7"</b>'
    sem = dashboard.locks.semaphore(name, permits=2, ttl=30)
    first, second = sem.acquire(), sem.acquire()
    assert first is not None and second is not None
    got: list[object] = []
    waiter = threading.Thread(target=lambda: got.append(sem.acquire(timeout=20)))
    waiter.start()
    try:
        for _ in range(200):  # until the waiter is queued (bounded)
            body = look(admin_client, name)
            if 'id="semaphore-waiters"' in body:
                break
            time.sleep(0.05)
        assert "<b>" not in body and "&lt;b&gt;" in body  # the name is escaped
        assert unescape(body.split('id="permit-count">')[1]).startswith("2<")
        assert first.id in unescape(body) and second.id in unescape(body)
        assert unescape(body.split('id="waiter-count">')[1]).startswith("1<")
    finally:
        first.release()
        waiter.join(20)
    [third] = got
    assert third is not None
    body = unescape(look(admin_client, name))
    assert first.id not in body and second.id in body and 'id="semaphore-waiters"' not in body
    second.release()
    third.release()  # type: ignore[attr-defined]
    assert 'id="no-permits"' in look(admin_client, name)


def test_lookup_of_a_bad_name_says_why(dashboard: Dashboard, admin_client: Client) -> None:
    body = look(admin_client, "")
    assert 'id="semaphore-permits"' not in body and 'id="semaphore-error"' not in body
    body = look(admin_client, "x" * 100_000)
    assert 'id="semaphore-error"' in body
