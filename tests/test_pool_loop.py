"""The async pool's event loop (queue/pool_loop.py): the same loop, with microsecond waits.

How late its timers fire is a duration and is measured in bench/workers.py; these tests
check what it is built from and that it still delivers every event and timer, in order.
"""

from __future__ import annotations

import asyncio
import ctypes
import selectors
import socket
import sys
import threading

import pytest

from django_redislock.queue.pool_loop import (
    PR_GET_TIMERSLACK,
    TIMER_SLACK_NS,
    FineEpollSelector,
    fine_timer_slack,
    new_loop,
)

linux = pytest.mark.skipif(not hasattr(selectors, "EpollSelector"), reason="epoll only")


@linux
def test_the_pools_loop_waits_with_the_fine_selector_under_the_default_policy() -> None:
    loop = new_loop()
    try:
        assert isinstance(loop, asyncio.SelectorEventLoop)
        assert type(loop._selector) is FineEpollSelector  # type: ignore[attr-defined]
    finally:
        loop.close()


@linux
def test_a_policy_of_the_users_keeps_its_own_loop() -> None:
    class Mine(asyncio.SelectorEventLoop):
        pass

    class Policy(asyncio.DefaultEventLoopPolicy):
        def new_event_loop(self) -> asyncio.AbstractEventLoop:
            return Mine()

    previous = asyncio.get_event_loop_policy()
    asyncio.set_event_loop_policy(Policy())
    try:
        loop = new_loop()
        try:
            assert type(loop) is Mine
            assert type(loop._selector) is not FineEpollSelector  # type: ignore[attr-defined]
        finally:
            loop.close()
    finally:
        asyncio.set_event_loop_policy(previous)


@linux
def test_the_selector_reports_a_ready_socket_during_a_timed_wait_and_nothing_after_one() -> None:
    selector = FineEpollSelector()
    left, right = socket.socketpair()
    try:
        selector.register(left, selectors.EVENT_READ, "left")
        assert selector.select(0.002) == []  # nothing ready: the wait ends empty
        right.send(b"x")
        [(key, events)] = selector.select(5.0)  # ready: returned at once, not after 5 s
        assert key.data == "left" and events == selectors.EVENT_READ
        [(key, _)] = selector.select(None)  # no timeout: epoll's own wait
        assert key.data == "left"
    finally:
        selector.close()
        left.close()
        right.close()


@linux
def test_timers_and_thread_wake_ups_run_in_order_on_the_pools_loop() -> None:
    loop = new_loop()
    seen: list[str] = []

    async def main() -> None:
        loop.call_later(0.003, seen.append, "3 ms")
        loop.call_later(0.001, seen.append, "1 ms")
        loop.call_soon_threadsafe(seen.append, "soon")
        await asyncio.sleep(0.005)
        seen.append("slept")

    try:
        loop.run_until_complete(main())
    finally:
        loop.close()
    assert seen == ["soon", "1 ms", "3 ms", "slept"]


def test_without_epoll_the_loop_is_asyncios_own(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(selectors, "EpollSelector", raising=False)
    loop = new_loop()
    try:
        assert type(loop._selector) is not FineEpollSelector  # type: ignore[attr-defined]
    finally:
        loop.close()


class CountingEpoll:
    """An epoll object that counts its ``poll`` calls (the rest goes to the real one)."""

    def __init__(self, real: object) -> None:
        self.real = real
        self.polls = 0

    def poll(self, *args: object) -> object:
        self.polls += 1
        return self.real.poll(*args)  # type: ignore[attr-defined]

    def __getattr__(self, name: str) -> object:
        return getattr(self.real, name)


@linux
def test_a_timed_wait_that_runs_out_makes_no_second_system_call() -> None:
    """A timer's wait (the async pool's usual one) ends with ``select()``: no ``epoll_wait``
    after it, which would drop and take back the GIL once more per timer."""
    selector = FineEpollSelector()
    epoll = CountingEpoll(selector._selector)  # type: ignore[attr-defined]
    selector._selector = epoll  # type: ignore[attr-defined]
    left, right = socket.socketpair()
    try:
        selector.register(left, selectors.EVENT_READ, "left")
        assert selector.select(0.002) == []
        assert epoll.polls == 0
        right.send(b"x")
        [(key, _)] = selector.select(5.0)  # an event: collected with one epoll_wait
        assert key.data == "left" and epoll.polls == 1
    finally:
        selector.close()
        left.close()
        right.close()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl is Linux's")
def test_the_loops_thread_asks_for_a_fine_timer_slack_and_only_that_thread() -> None:
    # Linux ends a timed wait up to the thread's slack late (50 us by default): a 10 ms
    # sleep on the pool lasted 10.137 ms with it, 10.064 ms with 1 ns
    libc = ctypes.CDLL(None)
    found: list[int] = []

    def in_thread() -> None:
        assert fine_timer_slack()
        found.append(int(libc.prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0)))

    thread = threading.Thread(target=in_thread)
    thread.start()
    thread.join()
    assert found == [TIMER_SLACK_NS]
    assert int(libc.prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0)) != TIMER_SLACK_NS  # this thread's own
