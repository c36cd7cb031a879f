"""The held-locks page's Waiters column on fakeredis, a real server and a real cluster."""

from __future__ import annotations

import threading
import time

from django.test import Client

from .conftest import BASE, Dashboard


def waiters_cell(html: str, count: int) -> bool:
    return f'<td class="numeric lock-waiters">{count}</td>' in html


def page_once_it_counts(admin_client: Client, prefix: str, waiters: int) -> str:
    """The locks page filtered by ``prefix``, polled (10 s at most) until it shows ``waiters``."""
    deadline = time.monotonic() + 10
    html = ""
    while time.monotonic() < deadline:
        html = admin_client.get(BASE + f"locks/?alias=default&prefix={prefix}").content.decode()
        if waiters_cell(html, waiters):
            break
        time.sleep(0.05)
    return html


def test_the_page_counts_the_threads_waiting_on_a_lock(
    dashboard: Dashboard, admin_client: Client
) -> None:
    got: list[bool] = []

    def waiter() -> None:
        lock = dashboard.locks.lock("order:5", ttl=10)
        got.append(lock.acquire(blocking=True, timeout=20))
        lock.release()

    with dashboard.locks.lock("order:5", ttl=10):
        threads = [threading.Thread(target=waiter) for _ in range(3)]
        for t in threads:
            t.start()
        html = page_once_it_counts(admin_client, "order", 3)
        assert waiters_cell(html, 3) and ">Waiters</th>" in html
    for t in threads:
        t.join(30)
    assert got == [True] * 3
    with dashboard.locks.lock("order:5", ttl=10):
        html = admin_client.get(BASE + "locks/?alias=default").content.decode()
        assert waiters_cell(html, 0)


def test_the_page_counts_the_readers_waiting_on_a_written_lock(
    dashboard: Dashboard, admin_client: Client
) -> None:
    rw = dashboard.locks.read_write_lock("sheet:9", ttl=10)
    got: list[bool] = []

    def reader() -> None:
        lock = rw.read()
        got.append(lock.acquire(blocking=True, timeout=20))
        lock.release()

    with rw.write():
        threads = [threading.Thread(target=reader) for _ in range(2)]
        for t in threads:
            t.start()
        html = page_once_it_counts(admin_client, "sheet", 2)
        assert waiters_cell(html, 2)
    for t in threads:
        t.join(30)
    assert got == [True] * 2
