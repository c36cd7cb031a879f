"""The semaphores and fair locks page (issue 30): listed from the coordination index with
their holders (id, TTL left, fence) and waiters in arrival order, names escaped; force
release of one permit or one fair hold is confirmed, audited and refused when stale
(fakeredis, single server and cluster)."""

from __future__ import annotations

import re
import threading
from html import unescape
from typing import Any
from urllib.parse import quote, urlencode

import pytest
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.admin.utils import quote as admin_quote
from django.test import Client

from django_redislock.exceptions import LockLost

from ..processes import wait_for
from .conftest import BASE, Dashboard

PAGE = BASE + "locks/coordination/"
HOSTILE = 'exports:<b>"t&7"</b>'


def page(client: Client) -> str:
    response = client.get(PAGE + "?alias=default")
    assert response.status_code == 200
    return response.content.decode()


def release_url(kind: str, name: str, holder_id: str) -> str:
    segment = quote(admin_quote(name), safe="")
    return f"{PAGE}default/{kind}/{segment}/release/?{urlencode({'id': holder_id})}"


def rows(body: str) -> list[str]:
    return re.findall(r'<tr class="coord-row".*?</tr>', body, re.S)


def entries() -> list[tuple[str, int, str]]:
    return [(e.object_repr, e.action_flag, e.change_message) for e in LogEntry.objects.all()]


def test_the_locks_page_links_here(dashboard: Dashboard, admin_client: Client) -> None:
    body = admin_client.get(BASE + "locks/").content.decode()
    assert 'id="coordination-link"' in body and PAGE in body


def test_semaphores_and_fair_locks_are_listed_with_holders_and_waiters(
    dashboard: Dashboard, admin_client: Client
) -> None:
    assert 'id="no-coord"' in page(admin_client)
    sem = dashboard.locks.semaphore(HOSTILE, permits=1, ttl=30)
    fair = dashboard.locks.fair_lock(HOSTILE, ttl=30, wait_lease=30)
    permit = sem.acquire()
    assert permit is not None and fair.acquire()
    got: list[Any] = []
    sem_waiter = threading.Thread(target=lambda: got.append(sem.acquire(timeout=30)))
    other = dashboard.locks.fair_lock(HOSTILE, ttl=30, wait_lease=30)
    fences: list[int] = []

    def fair_wait() -> None:
        if other.acquire(timeout=30):
            fences.append(other.fence)
            other.release()

    fair_waiter = threading.Thread(target=fair_wait)
    sem_waiter.start()
    fair_waiter.start()
    try:
        wait_for(lambda: sem.waiting() == 1 and fair.waiting() == 1, 60, "both waiters queued")
        body = page(admin_client)
        assert "<b>" not in body and "&lt;b&gt;" in body  # names escaped
        sem_row, fair_row = sorted(rows(body), key=lambda r: 'data-kind="semaphore"' in r)[::-1]
        assert 'data-kind="semaphore"' in sem_row and 'data-kind="fair"' in fair_row
        text = unescape(sem_row)
        assert permit.id in text and f"fence {permit.fence}" in text
        assert '<span class="waiter-count">1</span>' in sem_row
        fair_text = unescape(fair_row)
        assert f"fence {fair.fence}" in fair_text and "pid " in fair_text
        assert '<span class="waiter-count">1</span>' in fair_row
        assert 'class="button release-link"' in body  # the admin may release
    finally:
        permit.release()
        fair.release()
        sem_waiter.join(60)
        fair_waiter.join(60)
    assert got and got[0] is not None and fences
    got[0].release()
    assert 'id="no-coord"' in page(admin_client)  # the last release removed both entries


def test_a_latch_is_listed_with_its_count(dashboard: Dashboard, admin_client: Client) -> None:
    done = dashboard.locks.latch(HOSTILE, count=3)
    assert done.count_down() == 2
    [row] = rows(page(admin_client))
    assert 'data-kind="latch"' in row and "&lt;b&gt;" in row and "<b>" not in row
    assert '<span class="latch-count">2</span>' in row and "release-link" not in row
    assert admin_client.get(release_url("latch", HOSTILE, "x")).status_code == 404
    done.delete()
    assert 'id="no-coord"' in page(admin_client)


def test_force_release_of_a_permit_is_confirmed_and_logged(
    dashboard: Dashboard, admin_client: Client
) -> None:
    sem = dashboard.locks.semaphore(HOSTILE, permits=2, ttl=30)
    permit, kept = sem.acquire(), sem.acquire()
    assert permit is not None and kept is not None
    url = release_url("semaphore", HOSTILE, permit.id)
    confirm = admin_client.get(url).content.decode()
    assert "Yes, release it" in confirm and "<b>" not in confirm
    response = admin_client.post(url, {"id": permit.id}, follow=True)
    assert "Released permit" in response.content.decode()
    with pytest.raises(LockLost):
        permit.ensure_held()
    kept.ensure_held()  # only that permit
    [(name, flag, message)] = entries()
    assert name == f"semaphore {HOSTILE}" and flag == CHANGE and permit.id in message
    again = admin_client.post(url, {"id": permit.id}, follow=True).content.decode()
    assert "nothing to release" in again and len(entries()) == 1  # a stale form: no-op
    kept.release()


def test_force_release_of_a_fair_hold_hands_it_to_the_waiter(
    dashboard: Dashboard, admin_client: Client
) -> None:
    fair = dashboard.locks.fair_lock("report", ttl=30, wait_lease=30)
    assert fair.acquire()
    other = dashboard.locks.fair_lock("report", ttl=30, wait_lease=30)
    fences: list[int] = []

    def wait() -> None:
        if other.acquire(timeout=30):
            fences.append(other.fence)
            other.release()

    thread = threading.Thread(target=wait)
    thread.start()
    wait_for(lambda: fair.waiting() == 1, 60, "a queued waiter")
    assert fair._hold is not None
    token = fair._hold.owner
    url = release_url("fair", "report", token)
    assert "Yes, release it" in admin_client.get(url).content.decode()
    response = admin_client.post(url, {"id": token}, follow=True)
    assert "Released hold" in response.content.decode()
    thread.join(60)
    assert fences and fences[0] > fair.fence
    with pytest.raises(LockLost):
        fair.ensure_held()
    [(name, flag, message)] = entries()
    assert flag == CHANGE and name == "fair lock report" and f"fence {fair.fence}" in message


def test_release_needs_the_permission(
    fake: Dashboard, staff_client: Any, admin_client: Client
) -> None:
    sem = fake.locks.semaphore("s", permits=1, ttl=30)
    permit = sem.acquire()
    assert permit is not None
    viewer = staff_client("view_dashboard")
    body = viewer.get(PAGE + "?alias=default").content.decode()
    assert permit.id in unescape(body) and "release-link" not in body
    url = release_url("semaphore", "s", permit.id)
    assert viewer.post(url, {"id": permit.id}).status_code == 403
    permit.ensure_held()
    assert admin_client.get(PAGE + "default/mutex/s/release/?id=x").status_code == 404
    permit.release()
