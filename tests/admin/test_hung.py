"""A hung Redis (SIGSTOP): every admin page answers, says so, and pays one deadline per request.

The server is a redis-server of the test, stopped with SIGSTOP: it accepts
connections and never answers. A page (redirects followed) must come back
with the same message a refused connection gets on the same page, and the
reads of one request chain must wait out the deadline once: a page that reads
twice, or a failed read followed by a redirect to a page that reads again,
used to wait it two or three times. Waits are counted, not timed: each batch
of deadline threads started together that was abandoned is one paid deadline.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client, override_settings
from django.utils import timezone

from django_redislock.metrics import deadline

from ..servers import RedisProcess
from .conftest import BASE

Q = BASE + "queues/default/orders/"
TIMEOUT = 1.0
#: Generous bound on how long the test waits for abandoned reads to end.
PATIENCE = 30.0

PAGES = [
    BASE,
    BASE + "locks/",
    BASE + "locks/coordination/",  # semaphores and fair locks (issue 30)
    BASE + "locks/coordination/default/semaphore/s/release/?id=a%401",
    BASE + "workers/",
    BASE + "flash-sales/",
    Q,
    Q + "tasks/t1/",
    Q + "tasks/t1/payload/",
    Q + "tasks/t1/delete/",
    Q + "purge/",
    Q + "requeue-dead/",
    Q + "flow/pause/",
    Q + "runs/?function=shop.tasks.create_order&since=2026-01-01T00:00",  # recent runs, searched
    BASE + "task:default:orders:t1/change/",  # the audit trail's link to a task
    "/admin/shop/sale/",  # the example shop's own list, with each sale's Redis numbers
]


class Waits:
    """Deadline threads started and abandoned, to count the deadlines a request paid."""

    def __init__(self) -> None:
        self.started: dict[int, float] = {}
        self.abandoned: list[float] = []

    def paid(self, gap: float) -> int:
        """Batches of abandoned threads (started within ``gap`` s of each other)."""
        starts = sorted(self.abandoned)
        batches = 0
        last = -1e9
        for at in starts:
            if at - last > gap:
                batches += 1
            last = at
        return batches


@pytest.fixture
def waits(monkeypatch: pytest.MonkeyPatch) -> Waits:
    record = Waits()
    start, finish = deadline._start, deadline._finish

    def counted_start(key: Any, fn: Callable[[], Any]) -> Any:
        thread, box = start(key, fn)
        record.started[id(thread)] = time.monotonic()
        return thread, box

    def counted_finish(key: Any, thread: threading.Thread, box: Any, seconds: float) -> Any:
        if thread.is_alive():
            record.abandoned.append(record.started.get(id(thread), 0.0))
        return finish(key, thread, box, seconds)

    monkeypatch.setattr(deadline, "_start", counted_start)
    monkeypatch.setattr(deadline, "_finish", counted_finish)
    return record


def sale_on(server_url: str) -> None:
    from shop.models import Product, Sale

    product = Product.objects.create(name="Hung phone", price=1)
    now = timezone.now()
    Sale.objects.create(
        product=product, units=10, opens=now - timedelta(minutes=1), closes=now + timedelta(hours=1)
    )


def get(client: Client, page: str) -> Any:
    """The page, redirects followed (in the test's thread: the test database is in memory).

    A page that never answered would still come back: every Redis call of this
    app ends at its socket timeout.
    """
    return client.get(page, follow=True)


def settings_for(server_url: str) -> Any:
    params = {"LOCATION": server_url, "KEY_PREFIX": "adm", "OPTIONS": {}}
    return override_settings(
        REDISLOCK_LOCKS={"default": params},
        REDISLOCK_QUEUES={"default": params},
        REDISLOCK_ADMIN_TIMEOUT=TIMEOUT,
        REDISLOCK_ADMIN_STOCKS="shop.panel.live_stocks",
    )


def wait_for_abandoned_reads() -> None:
    """Let the reads of the previous page end (their socket timeout), so each page starts fresh."""
    end = time.monotonic() + PATIENCE
    while time.monotonic() < end:
        if not any(t.is_alive() for t in deadline._stuck.values()):
            deadline._stuck.clear()
            return
        time.sleep(0.05)
    raise AssertionError("an abandoned read never ended")


@pytest.mark.parametrize("page", PAGES)
def test_every_page_answers_a_hung_redis_once(
    page: str, stopped_server: RedisProcess, admin_client: Client, waits: Waits
) -> None:
    wait_for_abandoned_reads()
    with settings_for(stopped_server.url):
        sale_on(stopped_server.url)
        response = get(admin_client, page)
    body = response.content.decode()
    assert response.status_code == 200, (page, response.status_code)
    assert "did not answer within the 1 s page deadline" in body, page
    assert waits.paid(gap=TIMEOUT / 2) == 1, (page, waits.abandoned)


def test_a_refused_connection_gets_the_same_pages(admin_client: Client) -> None:
    from ..servers import closed_port

    with settings_for(f"redis://127.0.0.1:{closed_port()}/0"):
        sale_on("")
        for page in PAGES:
            response = get(admin_client, page)
            assert response.status_code == 200, (page, response.status_code)
