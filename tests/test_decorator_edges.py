"""``@distributed_lock`` where it used to go wrong: async class-based views, Redlock aliases,
lock names from any URL value, and a hold lost before the release."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from django.test import AsyncClient, Client, RequestFactory, override_settings

from django_redislock import distributed_lock, locks
from django_redislock.exceptions import InvalidArgument, LockLost, LockNotAcquired
from django_redislock.locking.keys import MAX_NAME_LENGTH
from django_redislock.locking.names import fill, safe_name

from . import lock_edge_urls
from .servers import RedisProcess


@pytest.fixture(autouse=True)
def _clean_default(redis_server: Any) -> Iterator[None]:
    redis_server.client().flushall()
    lock_edge_urls.RUNNING.clear()
    lock_edge_urls.PEAK.clear()
    yield
    redis_server.client().flushall()


@pytest.fixture
def quorum(redlock_servers: list[RedisProcess], redis_server: RedisProcess) -> Iterator[str]:
    """A Redlock alias ``quorum`` next to the default one."""
    alias = {
        "BACKEND": "django_redislock.backends.redlock.RedlockBackend",
        "LOCATION": [server.url for server in redlock_servers],
        "KEY_PREFIX": f"rl{uuid.uuid4().hex[:8]}",
        "OPTIONS": {"QUARANTINE_FRESH_MASTERS": False, "MASTER_TIMEOUT": 2.0},
    }
    aliases = {"default": {"LOCATION": redis_server.url, "KEY_PREFIX": "test"}, "quorum": alias}
    with override_settings(REDISLOCK_LOCKS=aliases):
        yield "quorum"


# -- async class-based views ------------------------------------------------------------------


@override_settings(ROOT_URLCONF="tests.lock_edge_urls")
@pytest.mark.parametrize(
    ("path", "view"),
    [("acbv", "class"), ("adispatch", "dispatch"), ("mdispatch", "method_decorator")],
)
def test_async_class_based_view_bodies_run_one_at_a_time(path: str, view: str) -> None:
    async def scenario() -> list[int]:
        client = AsyncClient()
        responses = await asyncio.gather(*(client.get(f"/{path}/7/") for _ in range(4)))
        return [response.status_code for response in responses]

    assert asyncio.run(scenario()) == [200] * 4
    assert lock_edge_urls.PEAK[view] == 1  # the lock was held while each body ran
    assert locks["default"].held_locks() == []


@override_settings(ROOT_URLCONF="tests.lock_edge_urls")
def test_method_decorator_on_a_sync_view_fills_the_template_from_url_kwargs() -> None:
    response = Client().get("/msync/5/")
    assert response.status_code == 200 and response.content == b"msync:5"


@override_settings(ROOT_URLCONF="tests.lock_edge_urls")
def test_async_class_based_view_waits_without_blocking_the_event_loop() -> None:
    holder = locks["default"].lock("acbv:9", ttl=0.5)  # expires while the request waits
    assert holder.acquire(blocking=False)

    async def scenario() -> tuple[int, int]:
        ticks = 0
        done = False

        async def tick() -> None:
            nonlocal ticks
            while not done:
                await asyncio.sleep(0.01)
                ticks += 1

        ticker = asyncio.ensure_future(tick())
        response = await AsyncClient().get("/acbv/9/")
        done = True
        await ticker
        return response.status_code, ticks

    status, ticks = asyncio.run(scenario())
    assert status == 200
    assert ticks >= 10  # the loop ran on during the ~0.5 s wait


# -- every on_locked policy on a Redlock alias ------------------------------------------------


def test_every_on_locked_policy_works_on_a_redlock_alias(quorum: str) -> None:
    holder = locks[quorum].lock("busy", ttl=5)
    assert holder.acquire(blocking=False)
    ran: list[str] = []

    @distributed_lock("busy", using=quorum, timeout=0, on_locked="raise")
    def raising() -> None:
        ran.append("raise")

    @distributed_lock("busy", using=quorum, timeout=0, on_locked="skip")
    def skipping() -> None:
        ran.append("skip")

    @distributed_lock("busy", using=quorum, timeout=0, on_locked="response")
    def responding() -> Any:
        ran.append("response")

    @distributed_lock("busy", using=quorum, timeout=0, on_locked=lambda lock: lock.name)
    def calling() -> None:
        ran.append("callable")

    @distributed_lock("busy", using=quorum, timeout=0, on_locked="response")
    async def responding_async() -> Any:
        ran.append("async")

    with pytest.raises(LockNotAcquired):
        raising()
    assert skipping() is None
    response = responding()
    assert response.status_code == 423 and 1 <= int(response["Retry-After"]) <= 5
    assert calling() == "busy"
    response = asyncio.run(responding_async())
    assert response.status_code == 423 and 1 <= int(response["Retry-After"]) <= 5
    assert ran == []
    holder.release()
    assert skipping() is None and ran == ["skip"]


def test_redlock_view_gets_423(quorum: str) -> None:
    @distributed_lock("page:{n}", using=quorum, ttl=5, timeout=0)
    def page(request: Any, n: int) -> Any:
        return "ran"

    holder = locks[quorum].lock("page:3", ttl=5)
    assert holder.acquire(blocking=False)
    response = page(RequestFactory().get("/"), n=3)
    assert response.status_code == 423
    holder.release()
    assert page(RequestFactory().get("/"), n=3) == "ran"


# -- lock names from any value ----------------------------------------------------------------


def test_short_plain_names_are_unchanged_and_others_escaped_distinctly() -> None:
    assert safe_name("order:42") == "order:42"
    assert fill("order:{x}", (), {"x": "a b-c/é"}) == "order:a b-c/é"
    values = ["{x}", "%7Bx%7D", "a\x01b", "a\x7fb", "}", "{", "%", "", " ", "  ", "\t"]
    names = [fill("k:{v}", (), {"v": value}) for value in values]
    assert len(set(names)) == len(names)
    assert names[0] == "k:%7Bx%7D" and names[1] == "k:%257Bx%257D"
    assert fill("{v}", (), {"v": ""}) == "%" and fill("{v}", (), {"v": " "}) == "%20"
    long_a, long_b = "a" * 600, "a" * 599 + "b"
    short_a, short_b = fill("k:{v}", (), {"v": long_a}), fill("k:{v}", (), {"v": long_b})
    assert short_a != short_b and len(short_a) <= MAX_NAME_LENGTH
    assert short_a.startswith("k:aaaa") and "%#" in short_a
    assert safe_name("x" * MAX_NAME_LENGTH) == "x" * MAX_NAME_LENGTH
    assert safe_name("{brace}") == "%7Bbrace%7D"


def test_a_lone_surrogate_is_the_only_refused_name() -> None:
    with pytest.raises(InvalidArgument, match="not valid text"):
        fill("k:{v}", (), {"v": "\ud800"})
    with pytest.raises(InvalidArgument, match="not valid text"):
        safe_name("\udfff")

    @distributed_lock(lambda value: value)
    def computed(value: str) -> str:
        return value

    assert computed("{weird}\n") == "{weird}\n"
    with pytest.raises(InvalidArgument):
        computed("\ud800")


def test_two_sets_of_values_never_give_one_name() -> None:
    """A value never holds the character that ends its field, so the split is known."""
    pairs = [("x:y", "z"), ("x", "y:z"), ("x%3Ay", "z"), ("x", "y%3Az")]
    names = [fill("pair:{a}:{b}", (), {"a": a, "b": b}) for a, b in pairs]
    assert len(set(names)) == len(names)
    assert names[0] == "pair:x%3Ay:z" and names[1] == "pair:x:y%3Az"
    assert fill("t:{a}-{b}", (), {"a": "1-2", "b": "3-4"}) == "t:1%2D2-3%2D4"
    with pytest.raises(InvalidArgument, match="side by side"):
        fill("{a}{b}", (), {"a": "ab", "b": "c"})


def test_a_name_callable_result_with_percent_is_escaped() -> None:
    assert safe_name("a{b") != safe_name("a%7Bb")
    assert safe_name("a%7Bb") == "a%257Bb" and safe_name("plain:42") == "plain:42"

    @distributed_lock(lambda value: value)
    def computed(value: str) -> str:
        return value

    assert computed("a{b") == "a{b" and computed("a%7Bb") == "a%7Bb"


def test_the_direct_api_refuses_a_lone_surrogate_naming_the_argument() -> None:
    with pytest.raises(InvalidArgument, match=r"^name .* is not valid text"):
        locks["default"].lock("\ud800")
    with pytest.raises(InvalidArgument, match=r"^name .* is not valid text"):
        locks["default"].read_write_lock("a\udfffb")


@override_settings(ROOT_URLCONF="tests.lock_edge_urls")
@pytest.mark.parametrize(
    ("url", "name"),
    [
        ("/anykey/plain-42", "anykey:plain-42"),
        ("/anykey/%7Bx%7D", "anykey:%7Bx%7D"),
        ("/anykey/a%01b", "anykey:a%01b"),
        ("/anykey/50%25", "anykey:50%25"),
    ],
)
def test_any_url_value_makes_a_lock_name(url: str, name: str) -> None:
    response = Client().get(url)
    assert response.status_code == 200 and response.content.decode() == name


@override_settings(ROOT_URLCONF="tests.lock_edge_urls")
def test_a_long_url_value_makes_a_shortened_name() -> None:
    response = Client().get("/anykey/" + "x" * 2000)
    assert response.status_code == 200
    name = response.content.decode()
    assert len(name) <= MAX_NAME_LENGTH and name.startswith("anykey:xxx") and "%#" in name


def test_a_view_answers_a_name_it_cannot_make_with_400() -> None:
    @distributed_lock("item:{key}", timeout=0)
    def view(request: Any, key: str) -> Any:
        return "ran"

    @distributed_lock("item:{key}", timeout=0)
    async def async_view(request: Any, key: str) -> Any:
        return "ran"

    request = RequestFactory().get("/")
    assert view(request, key="\ud800").status_code == 400
    assert asyncio.run(async_view(request, key="\ud800")).status_code == 400
    assert view(request, key="{fine}") == "ran"


# -- a hold lost before the release -----------------------------------------------------------


@override_settings(ROOT_URLCONF="tests.lock_edge_urls")
def test_a_view_whose_lock_was_lost_answers_409_not_500() -> None:
    client = Client(raise_request_exception=False)
    response = client.get("/lost/1/")
    assert response.status_code == 409
    assert response["X-Lock-Lost-Status"] == "201"
    assert client.get("/lostok/1/").status_code == 201  # on_release_lost="ignore"

    async def scenario() -> int:
        return int((await AsyncClient(raise_request_exception=False).get("/alost/1/")).status_code)

    assert asyncio.run(scenario()) == 409


def test_release_lost_policies_outside_views() -> None:
    def steal(name: str) -> None:
        locks["default"].force_release(name)

    @distributed_lock("job:{n}", ttl=5)
    def job(n: int) -> str:
        steal(f"job:{n}")
        return "done"

    @distributed_lock("job:{n}", ttl=5, on_release_lost=lambda lock, result, n: (result, n))
    def reported(n: int) -> Any:
        steal(f"job:{n}")
        return "done"

    with pytest.raises(LockLost):
        job(1)  # not a view: raise by default
    assert reported(2) == ("done", 2)
    with pytest.raises(InvalidArgument, match="on_release_lost"):
        distributed_lock("x", on_release_lost="maybe")


def test_an_error_of_the_function_is_not_hidden_by_a_lost_release() -> None:
    @distributed_lock("failing", ttl=5)
    def failing() -> None:
        locks["default"].force_release("failing")
        raise KeyError("the function's own error")

    with pytest.raises(KeyError, match="own error"):
        failing()


def test_only_dispatch_of_an_async_view_is_awaited_under_the_lock() -> None:
    from django.views import View

    class Page(View):
        async def get(self, request: Any) -> Any: ...

        @distributed_lock("helper", ttl=5)
        def helper(self, value: int) -> int:  # a plain method: called, not turned into a coroutine
            return value + 1

    assert Page().helper(1) == 2


def test_a_cancelled_decorated_coroutine_releases_its_lock() -> None:
    @distributed_lock("body", ttl=30)
    async def slow() -> None:
        await asyncio.sleep(10)

    async def scenario() -> bool:
        task = asyncio.ensure_future(slow())
        await asyncio.sleep(0.2)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return bool(await locks["default"].lock("body").locked_async())

    assert asyncio.run(scenario()) is False
