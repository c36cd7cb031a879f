"""Who may do what: staff only, one permission per action, CSRF, escaping, Redis down."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
from django.contrib.admin.models import LogEntry
from django.test import Client, override_settings

from .conftest import BASE, Dashboard, dead_task

Q = BASE + "queues/default/orders/"
StaffClient = Callable[..., Client]


@pytest.fixture
def seeded(fake: Dashboard) -> Dashboard:
    q = fake.queue()
    q.enqueue("job", {"x": 1}, delay=600)
    dead_task(q, "dead")
    lock = fake.locks.lock("order:1", ttl=60)
    assert lock.acquire(blocking=False)
    return fake


def actions(seeded: Dashboard) -> list[tuple[str, str, dict[str, str]]]:
    """(permission, url, form) of every POST action."""
    job = seeded.queue().get("job")
    dead = seeded.queue().get("dead")
    fence = seeded.locks.held_locks()[0].fence
    return [
        ("release_locks", BASE + "locks/default/order%3A1/release/", {"fence": str(fence)}),
        ("manage_tasks", Q + "tasks/job/run/", {"where": "1", "score": str(job.score)}),
        ("manage_tasks", Q + "tasks/dead/requeue/", {"where": "3", "score": str(dead.score)}),
        ("manage_tasks", Q + "tasks/job/delete/", {"where": "1", "score": str(job.score)}),
        (
            "manage_tasks",
            Q + "actions/",
            {"state": "dead", "action": "requeue", "selected": f"{dead.score}:dead"},
        ),
        ("manage_tasks", Q + "requeue-dead/", {"count": "1"}),
        ("purge_queues", Q + "purge/", {"count": "2"}),
    ]


def test_anonymous_and_plain_staff_are_kept_out(
    seeded: Dashboard, client: Client, staff_client: StaffClient
) -> None:
    response = client.get(BASE)
    assert response.status_code == 302 and "/admin/login/" in response["Location"]
    nobody = staff_client()
    assert nobody.get(BASE).status_code == 403
    assert nobody.get(Q).status_code == 403
    assert BASE not in nobody.get("/admin/").content.decode()


def test_view_only_sees_no_buttons_and_gets_403_on_every_action(
    seeded: Dashboard, staff_client: StaffClient
) -> None:
    viewer = staff_client("view_dashboard")
    assert BASE in viewer.get("/admin/").content.decode()
    pages = [BASE, BASE + "locks/", Q, Q + "?state=dead", Q + "tasks/job/", Q + "tasks/dead/"]
    for page in pages:
        response = viewer.get(page)
        html = response.content.decode()
        assert response.status_code == 200, page
        for button in (
            "release-link",
            'name="selected"',
            "Purge queue",
            "Requeue",
            "Delete",
            "Run now",
        ):
            assert button not in html, (page, button)
    for _, url, form in actions(seeded):
        assert viewer.get(url).status_code == 403, url  # no confirmation page either
        assert viewer.post(url, form).status_code == 403, url
    assert seeded.queue().get("job") is not None and seeded.locks.held_lock_count() == 1
    assert LogEntry.objects.count() == 0


@pytest.mark.parametrize("codename", ["release_locks", "manage_tasks", "purge_queues"])
def test_each_action_needs_its_own_permission(
    seeded: Dashboard, staff_client: StaffClient, codename: str
) -> None:
    user = staff_client("view_dashboard", codename)
    for needed, url, form in actions(seeded):
        status = user.post(url, form).status_code
        assert (status == 302) if needed == codename else (status == 403), (codename, url)


def test_csrf_is_enforced(seeded: Dashboard, staff_client: StaffClient) -> None:
    user = staff_client("view_dashboard", "release_locks", csrf=True)
    url = BASE + "locks/default/order%3A1/release/"
    fence = str(seeded.locks.held_locks()[0].fence)
    assert user.post(url, {"fence": fence}).status_code == 403
    assert seeded.locks.held_lock_count() == 1
    confirm = user.get(url).content.decode()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', confirm)
    assert token is not None
    response = user.post(url, {"fence": fence, "csrfmiddlewaretoken": token.group(1)})
    assert response.status_code == 302 and seeded.locks.held_lock_count() == 0
    [entry] = LogEntry.objects.all()
    assert entry.object_repr == "lock order:1" and entry.user.username.startswith("staff-")
    assert entry.content_type.app_label == "django_redislock"


def test_payloads_ids_and_errors_are_escaped(fake: Dashboard, admin_client: Client) -> None:
    evil = "<script>alert(1)</script>"
    q = fake.queue()
    q.enqueue(evil, {"html": "<img src=x onerror=alert(2)>"})
    dead_task(q, "d", error="<b>boom</b>")
    lock = fake.locks.lock(evil, ttl=60)
    assert lock.acquire(blocking=False)
    pages = [
        Q,
        Q + "?state=dead",
        Q + "tasks/%3Cscript%3Ealert(1)%3C_2Fscript%3E/",
        BASE + "locks/",
    ]
    for page in pages:
        html = admin_client.get(page).content.decode()
        assert "<script>alert" not in html and "<img src=x" not in html and "<b>boom" not in html
    detail = admin_client.get(pages[2]).content.decode()
    assert "&lt;img src=x onerror=alert(2)&gt;" in detail


def test_redis_down_shows_the_error_not_a_500(db: None, admin_client: Client) -> None:
    down = {"default": {"LOCATION": "redis://127.0.0.1:1/0", "OPTIONS": {"SOCKET_TIMEOUT": 0.5}}}
    with override_settings(REDISLOCK_LOCKS=down, REDISLOCK_QUEUES=down):
        for page in (BASE, BASE + "locks/", Q, Q + "?q=x"):
            response = admin_client.get(page)
            assert response.status_code == 200, page
            assert "is unreachable" in response.content.decode(), page
        for url in (Q + "tasks/x/", BASE + "locks/default/x/release/", Q + "purge/"):
            response = admin_client.get(url, follow=True)
            assert response.status_code == 200 and "unreachable" in response.content.decode(), url
        response = admin_client.post(
            Q + "tasks/x/delete/", {"where": "1", "score": "1"}, follow=True
        )
        assert response.status_code == 200 and "unreachable" in response.content.decode()


def test_permissions_without_a_table(db: None) -> None:
    from django.contrib.auth.models import Permission
    from django.db import connection

    codenames = set(
        Permission.objects.filter(content_type__app_label="django_redislock").values_list(
            "codename", flat=True
        )
    )
    assert codenames == {"view_dashboard", "release_locks", "manage_tasks", "purge_queues"}
    assert not any("django_redislock" in name for name in connection.introspection.table_names())
