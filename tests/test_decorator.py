"""``@distributed_lock`` on every kind of callable, and as a context manager."""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from django.core.management import call_command
from django.test import Client, override_settings

from django_redislock import distributed_lock, locks
from django_redislock.exceptions import InvalidArgument, LockNotAcquired
from django_redislock.queue.registry import task


@pytest.fixture(autouse=True)
def _clean_default(redis_server: Any) -> Iterator[None]:
    redis_server.client().flushall()
    yield
    redis_server.client().flushall()


def held_elsewhere(name: str, ttl: float = 5) -> Any:
    """Take ``name`` on the default alias from another thread's point of view (a fresh object)."""
    lock = locks["default"].lock(name, ttl=ttl)
    assert lock.acquire(blocking=False)
    return lock


def test_plain_function_template_and_signature() -> None:
    calls: list[int] = []

    @distributed_lock("order:{order_id}", ttl=5, timeout=0)
    def pay(order_id: int, amount: int = 1) -> str:
        assert locks["default"].lock(f"order:{order_id}", ttl=5).locked()
        calls.append(order_id)
        return f"paid {order_id}"

    assert pay(42) == "paid 42" and pay(order_id=7, amount=3) == "paid 7"
    assert calls == [42, 7]
    assert str(inspect.signature(pay)) == "(order_id: 'int', amount: 'int' = 1) -> 'str'"
    holder = held_elsewhere("order:42")
    with pytest.raises(LockNotAcquired):
        pay(42)
    assert pay(43) == "paid 43"
    holder.release()


def test_skip_and_callable_on_locked_and_callable_name() -> None:
    @distributed_lock(lambda job_id: f"job:{job_id}", timeout=0, on_locked="skip")
    def run(job_id: int) -> str:
        return "ran"

    seen: list[Any] = []

    @distributed_lock("job:{0}", timeout=0, on_locked=lambda lock, *a: seen.append(lock.name))
    def other(*job: int) -> str:
        return "ran"

    holder = held_elsewhere("job:5")
    assert run(5) is None and run(6) == "ran"
    assert other(5) is None and seen == ["job:5"]
    holder.release()
    assert run(5) == "ran"


def test_async_function() -> None:
    @distributed_lock("a:{x}", ttl=5, timeout=0)
    async def work(x: int) -> int:
        await asyncio.sleep(0)
        return x * 2

    async def main() -> None:
        assert await work(2) == 4
        holder = locks["default"].lock("a:3", ttl=5)
        await holder.acquire_async()
        with pytest.raises(LockNotAcquired):
            await work(3)
        await holder.release_async()

    asyncio.run(main())


def test_waits_for_the_lock_when_timeout_allows() -> None:
    order: list[str] = []
    holder = held_elsewhere("slow", ttl=5)

    @distributed_lock("slow", timeout=5)
    def after() -> None:
        order.append("decorated")

    # A Lock object belongs to the thread that took it: the decorated call waits in another.
    thread = threading.Thread(target=after)
    thread.start()
    threading.Event().wait(0.2)
    order.append("released")
    holder.release()
    thread.join(10)
    assert order == ["released", "decorated"]


def test_context_manager_sync_async_and_nested() -> None:
    guard = distributed_lock("report", ttl=5, timeout=0)
    with guard as lock:
        assert lock.locked() and lock.name == "report"
        with distributed_lock("other", timeout=0):
            pass
        with pytest.raises(LockNotAcquired), distributed_lock("report", timeout=0):
            pass
    assert not locks["default"].lock("report").locked()

    async def main() -> None:
        async with guard as lock:
            assert await lock.locked_async()

    asyncio.run(main())
    with pytest.raises(InvalidArgument, match="template"), distributed_lock("order:{id}"):
        pass


def test_queue_task_function() -> None:
    @task(queue="reports", name="tests.locked_task")
    @distributed_lock("build:{day}", timeout=0, on_locked="skip")
    def build(day: str) -> str:
        return f"built {day}"

    assert build("mon") == "built mon"
    holder = held_elsewhere("build:mon")
    assert build("mon") is None
    holder.release()


def test_bad_arguments() -> None:
    with pytest.raises(InvalidArgument, match="name"):
        distributed_lock("")
    with pytest.raises(InvalidArgument, match="on_locked"):
        distributed_lock("x", on_locked="ignore")
    with pytest.raises(InvalidArgument, match="using"):
        distributed_lock("x", using="")
    with pytest.raises(InvalidArgument, match="class"):
        distributed_lock("x")(type("Plain", (), {}))

    @distributed_lock("order:{missing}")
    def f(order_id: int) -> None: ...

    with pytest.raises(InvalidArgument, match="missing"):
        f(1)

    @distributed_lock("order:{order_id}", ttl=-1)
    def g(order_id: int) -> None: ...

    with pytest.raises(InvalidArgument, match="ttl"):
        g(1)

    @distributed_lock("order:{order_id}")
    def h(order_id: str) -> None: ...

    with pytest.raises(InvalidArgument, match="name"):
        h("\ud800")  # a lone surrogate: not text (braces are escaped, see test_lock_names)
    assert locks["default"].held_locks() == []


@override_settings(ROOT_URLCONF="tests.lock_urls")
def test_function_view_gets_423_with_retry_after() -> None:
    client = Client()
    assert client.get("/pay/1/").content == b"paid 1"
    holder = held_elsewhere("order:1", ttl=20)
    response = client.get("/pay/1/")
    # the holder's remaining TTL in whole seconds (slack for a stall of a loaded machine)
    assert response.status_code == 423 and 15 <= int(response["Retry-After"]) <= 20
    assert client.get("/pay/2/").status_code == 200
    holder.release()
    assert client.get("/pay/1/").status_code == 200


@override_settings(ROOT_URLCONF="tests.lock_urls")
def test_the_423_is_plain_text_or_json_and_never_shows_the_lock_name() -> None:
    client = Client()
    holder = held_elsewhere("order:7", ttl=20)
    try:
        text = client.get("/pay/7/", HTTP_ACCEPT="text/html,*/*")
        assert text.status_code == 423 and text["Content-Type"].startswith("text/plain")
        assert b"order" not in text.content and b"Locked" in text.content
        api = client.get("/pay/7/", HTTP_ACCEPT="application/json")
        assert api.status_code == 423 and api["Content-Type"] == "application/json"
        body = api.json()
        assert body["error"] == "locked" and body["retry_after"] == int(api["Retry-After"])
        assert "order" not in api.content.decode()
    finally:
        holder.release()


@override_settings(ROOT_URLCONF="tests.lock_urls")
def test_async_view() -> None:
    client = Client()
    assert client.get("/profile/").status_code == 200
    holder = held_elsewhere("user:None")
    assert client.get("/profile/").status_code == 423
    holder.release()


@override_settings(ROOT_URLCONF="tests.lock_urls")
def test_class_based_views_on_the_class_and_on_dispatch() -> None:
    client = Client(raise_request_exception=True)
    assert client.get("/doc/3/").content == b"doc 3"
    assert client.get("/export/csv/").content == b"export csv"
    holder = held_elsewhere("doc:3")
    assert client.get("/doc/3/").status_code == 423
    holder.release()
    holder = held_elsewhere("export:csv")
    with pytest.raises(LockNotAcquired):
        client.get("/export/csv/")  # on_locked="raise" on dispatch
    holder.release()


def test_management_command_handle() -> None:
    from io import StringIO

    out = StringIO()
    call_command("locked_report", "daily", stdout=out)
    assert "built daily" in out.getvalue()
    holder = held_elsewhere("report:daily")
    out = StringIO()
    call_command("locked_report", "daily", stdout=out)
    assert out.getvalue() == ""  # skipped while another run holds the lock
    holder.release()
