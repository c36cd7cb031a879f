"""The admin dashboard with a Redlock alias: counts, merged pages and force release."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from html import unescape
from typing import Any

import pytest
from django.test import Client, override_settings

from django_redislock.handlers import locks

from ..servers import RedisProcess
from .conftest import BASE
from .test_pages import rows


@pytest.fixture
def quorum(redlock_servers: list[RedisProcess], redis_server: RedisProcess) -> Iterator[Any]:
    alias = {
        "BACKEND": "django_redislock.backends.redlock.RedlockBackend",
        "LOCATION": [server.url for server in redlock_servers],
        "KEY_PREFIX": f"adm{uuid.uuid4().hex[:8]}",
        # a live master may answer slowly on a loaded CI machine (the default allows 0.25 s)
        "OPTIONS": {"QUARANTINE_FRESH_MASTERS": False, "MASTER_TIMEOUT": 2.0},
    }
    default = {"LOCATION": redis_server.url, "KEY_PREFIX": "adm"}
    with override_settings(
        REDISLOCK_LOCKS={"default": default, "quorum": alias}, REDISLOCK_QUEUES={"default": default}
    ):
        yield locks["quorum"]


def test_overview_and_pages_merge_the_masters(quorum: Any, admin_client: Client) -> None:
    names = [f"job:{i:03d}" for i in range(120)]
    held = [quorum.lock(name, ttl=60) for name in names]
    for lock in held:
        assert lock.acquire(blocking=False)
    overview = admin_client.get(BASE).content.decode()
    assert re.search(r'<th scope="row">quorum</th>\s*<td class="numeric">120</td>', overview)
    assert walk(admin_client, BASE + "locks/?alias=quorum", "next") == names
    last = BASE + "locks/?alias=quorum&before=job%3A999"
    assert walk(admin_client, last, "previous") == names  # each page still in name order
    for lock in held:
        lock.release()


def walk(admin_client: Client, link: str, direction: str) -> list[str]:
    """The rows of every page from ``link`` on, following the ``next`` or ``previous`` links."""
    pages: list[list[str]] = []
    for _ in range(5):
        html = admin_client.get(link).content.decode()
        pages.append(rows(html))
        found = re.search(rf'<a href="([^"]+)" class="{direction}-page">', html)
        if not found:
            break
        link = unescape(found.group(1))
    ordered = pages if direction == "next" else pages[::-1]
    return [name for page in ordered for name in page]


def test_force_release_from_the_admin(quorum: Any, admin_client: Client) -> None:
    lock = quorum.lock("order:42", ttl=60)
    lock.acquire()
    url = BASE + "locks/quorum/order%3A42/release/"
    confirm = admin_client.get(url).content.decode()
    fence = re.search(r'name="fence" value="(\d+)"', confirm)
    assert fence and int(fence.group(1)) == lock.fence
    done = admin_client.post(url, {"fence": fence.group(1)}, follow=True)
    assert done.status_code == 200 and not lock.owned()
    again = quorum.lock("order:42", ttl=5)
    assert again.acquire(blocking=False) and again.fence > lock.fence
    again.release()
