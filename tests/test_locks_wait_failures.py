"""A waiter whose wait for a wake-up is cut goes on waiting (issue 23, item 7b).

docs/calls.md: a failed wait changed nothing, and the caller's loop goes on. A
waiter blocked on the signal list has its connection cut (through the fault
proxy); it must try again and wait on, so the holder's later release gives it
the lock, rather than ending ``acquire(timeout=20)`` with ``ConnectionFailed``.
"""

from __future__ import annotations

import asyncio
import threading
import uuid

import pytest

from .proxied import ProxiedTarget


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("kind", ["single", "cluster"])
def test_a_cut_wait_connection_does_not_end_the_acquire(
    request: pytest.FixtureRequest, kind: str, mode: str
) -> None:
    proxied: ProxiedTarget = request.getfixturevalue(f"proxied_{kind}")
    backend = proxied.lock_backend()
    name = f"cut-wait:{uuid.uuid4().hex[:8]}"
    holder = backend.lock(name, ttl=30)
    assert holder.acquire(blocking=False)
    results: list[object] = []

    async def acquire_release() -> None:
        # one task acquires and releases: a hold belongs to the task that took it
        got = await lock.acquire_async(timeout=20)
        results.append(got)
        if got:
            await lock.release_async()

    lock = backend.lock(name, ttl=30)

    def waiter() -> None:
        try:
            if mode == "async":
                asyncio.run(acquire_release())
                return
            results.append(lock.acquire(timeout=20))
            if results[-1] is True:
                lock.release()
        except BaseException as exc:
            results.append(exc)

    thread = threading.Thread(target=waiter, daemon=True)
    thread.start()
    assert proxied.cut_once_sent("BLPOP") >= 1
    # the waiter goes back to waiting: its next BLPOP goes out
    before = proxied.count("BLPOP")
    deadline_ok = threading.Event()

    def blocked_again() -> bool:
        return proxied.count("BLPOP") > before or bool(results)

    for _ in range(1000):  # bounded: up to about 10 s
        if blocked_again():
            deadline_ok.set()
            break
        threading.Event().wait(0.01)
    assert deadline_ok.is_set(), "the waiter neither waited again nor ended"
    assert not results, f"the acquire ended after the cut: {results}"
    holder.release()
    thread.join(30)
    assert results == [True]
