"""``RateLimiter`` (GCRA on Redis) and ``@rate_limited``: admitted counts, waits, resends, 429s.

A limit whose refusals a test asserts is slow ("1/m"), so that a loaded machine cannot
spend a whole interval between two calls of one test; every assertion is a count or an
order, and the only waits are for slots a limiter reserved ("10/s").
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from django.test import RequestFactory

from django_redislock import rate_limited
from django_redislock.exceptions import InvalidArgument, RateLimited

from .conftest import RedisTarget


def limiter(
    target: RedisTarget, rate: str = "1/m", burst: int | None = 3, *, local: bool = True
) -> Any:
    return target.lock_backend().rate_limiter("api", rate, burst=burst, local_refusals=local)


def test_a_burst_is_admitted_then_the_next_is_told_when(redis_target: RedisTarget) -> None:
    limit = limiter(redis_target)
    assert [limit.try_acquire().admitted for _ in range(3)] == [True, True, True]
    refused = limit.try_acquire()
    assert not refused.admitted and 30 < refused.retry_after <= 60
    assert limit.acquire(timeout=1) is False  # its slot is further away: nothing charged
    assert 0 < limit.try_acquire().retry_after <= refused.retry_after
    fast = redis_target.lock_backend().rate_limiter("fast", "10/s", burst=1)
    assert [fast.acquire(timeout=5) for _ in range(3)] == [True, True, True]  # each waits


def test_each_key_has_its_own_limit(redis_target: RedisTarget) -> None:
    limit = limiter(redis_target, burst=1)
    assert limit.try_acquire(key="tenant-1").admitted
    assert not limit.try_acquire(key="tenant-1").admitted
    assert limit.try_acquire(key="tenant-2").admitted
    assert limit.try_acquire(key="{odd}:key").admitted  # braces cannot break the hash tag
    assert limit.try_acquire().admitted  # no key: the limit of the name itself


def test_a_cost_uses_as_many_units(redis_target: RedisTarget) -> None:
    limit = limiter(redis_target, "1/m", burst=4)
    assert limit.try_acquire(3).admitted
    refused = limit.try_acquire(2)
    assert not refused.admitted and 30 < refused.retry_after <= 60
    assert limit.try_acquire(1).admitted


def test_bad_input_names_the_argument_and_changes_nothing(redis_target: RedisTarget) -> None:
    backend = redis_target.lock_backend()
    with pytest.raises(InvalidArgument, match="rate"):
        backend.rate_limiter("api", "ten per second")
    with pytest.raises(InvalidArgument, match="burst"):
        backend.rate_limiter("api", "10/s", burst=0)
    with pytest.raises(InvalidArgument, match="name"):
        backend.rate_limiter("{api}", "10/s")
    limit = limiter(redis_target)
    with pytest.raises(InvalidArgument, match="cost"):
        limit.try_acquire(4)
    with pytest.raises(InvalidArgument, match="timeout"):
        limit.acquire(timeout=-1)
    assert redis_target.raw.keys("*") == []


def test_a_resent_take_is_charged_once(redis_target: RedisTarget) -> None:
    """A take whose reply was lost and that the client sends again (same request key)."""
    limit = limiter(redis_target, burst=2, local=False)
    script, keys, args = limit._call(1, None)
    run = limit.backend.script(script)
    assert run(keys=keys, args=args) == [1, 0]
    assert run(keys=keys, args=args) == [1, 0]  # the resend: admitted, not charged again
    assert limit.try_acquire().admitted  # the burst's second unit is still there
    assert not limit.try_acquire().admitted


def test_a_resent_reservation_answers_the_same_slot(redis_target: RedisTarget) -> None:
    # the script is called around the limiter: the server's own answers are asserted
    limit = limiter(redis_target, "1/m", burst=1, local=False)
    assert limit.try_acquire().admitted  # the burst is used: the next slot is a minute away
    script, keys, args = limit._call(1, None, wait=120)
    run = limit.backend.script(script)
    admitted, wait = run(keys=keys, args=args)
    assert admitted == 1 and 30_000_000 < wait <= 60_000_000
    again, wait_again = run(keys=keys, args=args)  # the resend: the same slot, not a new one
    assert again == 1 and wait_again <= wait
    refused = limit.try_acquire()
    assert not refused.admitted and 90 < refused.retry_after <= 120  # one slot reserved, not two


def test_an_idle_limit_leaves_nothing_behind_but_resend_records(redis_target: RedisTarget) -> None:
    limit = limiter(redis_target, "1/m", burst=1)
    assert limit.try_acquire().admitted
    state = [key for key in redis_target.raw.keys("*") if b":tat" in key]
    assert len(state) == 1 and 0 < redis_target.raw.pttl(state[0]) <= 60_002


def test_asyncio_twins(redis_target: RedisTarget) -> None:
    slow = limiter(redis_target, "1/m", burst=1)
    fast = redis_target.lock_backend().rate_limiter("fast", "10/s", burst=1)

    async def main() -> list[bool]:
        first = (await slow.try_acquire_async()).admitted
        second = (await slow.try_acquire_async()).admitted
        refused = await slow.acquire_async(timeout=1)  # its slot is a minute away
        waited = [await fast.acquire_async(timeout=5) for _ in range(3)]
        return [first, second, refused, *waited]

    assert asyncio.run(main()) == [True, False, False, True, True, True]


# -- @rate_limited -----------------------------------------------------------------------


@pytest.fixture
def _clean_default(redis_server: Any) -> Iterator[None]:
    redis_server.client().flushall()
    yield
    redis_server.client().flushall()


@pytest.mark.usefixtures("_clean_default")
def test_a_view_over_its_limit_answers_429_with_retry_after() -> None:
    @rate_limited("1/m", key=lambda request: request.GET.get("user"))
    def view(request: Any) -> Any:
        from django.http import HttpResponse

        return HttpResponse("ok")

    factory = RequestFactory()
    assert view(factory.get("/", {"user": "a"})).status_code == 200
    refused = view(factory.get("/", {"user": "a"}, HTTP_ACCEPT="application/json"))
    assert refused.status_code == 429 and 55 <= int(refused["Retry-After"]) <= 60
    assert json.loads(refused.content)["error"] == "rate_limited"
    assert view(factory.get("/", {"user": "b"})).status_code == 200  # another user's limit


@pytest.mark.usefixtures("_clean_default")
def test_a_function_waits_for_its_slot_or_raises_past_its_timeout() -> None:
    calls: list[int] = []

    @rate_limited("10/s", burst=1)
    def send(n: int) -> None:
        calls.append(n)

    @rate_limited("1/m", burst=1, timeout=0.5)
    def rare(n: int) -> None:
        calls.append(n)

    send(1)
    send(2)  # waited for the next slot
    rare(3)
    with pytest.raises(RateLimited):
        rare(4)  # its slot is a minute away
    assert calls == [1, 2, 3]


@pytest.mark.usefixtures("_clean_default")
def test_an_async_view_gets_its_429_too() -> None:
    @rate_limited("1/m")
    async def view(request: Any) -> Any:
        from django.http import HttpResponse

        return HttpResponse("ok")

    async def main() -> list[int]:
        factory = RequestFactory()
        return [(await view(factory.get("/"))).status_code for _ in range(2)]

    assert asyncio.run(main()) == [200, 429]


def test_bad_decorator_arguments_are_refused_when_applied() -> None:
    with pytest.raises(InvalidArgument, match="rate"):
        rate_limited("fast")
    with pytest.raises(InvalidArgument, match="key"):
        rate_limited("1/s", key="user")  # type: ignore[arg-type]


@pytest.mark.parametrize("steps", [0, 1, 2, 3, 4, 5])
def test_a_twice_cancelled_take_never_leaves_its_reply_to_the_next_call(
    redis_target: RedisTarget, steps: int
) -> None:
    """A take cancelled (twice, ``steps`` loop steps in) leaves no reply behind on a pooled
    connection: the next call on the same client reads its own answer. The cancelled takes
    are admitted when they reach Redis; the next calls must be refused (their limit is
    used), so a stray "admitted" read by one of them would show."""
    backend = redis_target.lock_backend()
    open_limit = backend.rate_limiter("wide", "1/m", burst=1000)
    full = backend.rate_limiter("full", "1/m", burst=1)

    async def cancel_after(n: int) -> None:
        call = asyncio.ensure_future(open_limit.acquire_async(timeout=0))
        for _ in range(n):
            await asyncio.sleep(0)
        call.cancel()
        await asyncio.sleep(0)
        call.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await call

    async def main() -> list[bool]:
        assert (await full.try_acquire_async()).admitted
        answers = []
        for _ in range(10):
            await cancel_after(steps)
            answers.append((await full.try_acquire_async()).admitted)
        return answers

    assert asyncio.run(main()) == [False] * 10


def test_the_state_outlives_its_tat_when_time_is_sampled_late_in_the_call(
    fakeredis_target: RedisTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The limit's state key must not expire before its tat, however a server samples time.

    fakeredis takes a command's clock (what ``PX`` counts from) when the command starts and
    ``TIME`` when the script calls it, so a process descheduled in between (a loaded
    machine) has them apart. A ``PX`` counted from ``TIME`` then ended the state that much
    before its tat, and a take in that gap was admitted early (over the limit). The expiry
    is now absolute (``PXAT``), in ``TIME``'s own clock. Here the take's ``TIME`` comes
    200 ms after its command started: the state's expiry, read back, must not be before its
    tat (it was 199 ms before it)."""
    from fakeredis.commands_mixins.server_mixin import ServerCommandsMixin

    time_command = ServerCommandsMixin.time
    stalls = [0.200]

    def late_time(self: Any) -> list[bytes]:
        if stalls:
            time.sleep(stalls.pop())
        return time_command(self)

    backend = fakeredis_target.lock_backend()
    limit = backend.rate_limiter("stall", "1/m", burst=1, local_refusals=False)
    monkeypatch.setattr(ServerCommandsMixin, "time", late_time)
    assert limit.try_acquire().admitted
    assert not stalls  # the take's TIME was the late one
    state = backend.key(limit._tag(None), "tat")
    stored = backend.client.get(state)
    assert stored is not None
    tat_ms = int(stored) / 1000
    assert backend.client.pexpiretime(state) >= tat_ms
    assert not limit.try_acquire().admitted  # and the next take is refused
