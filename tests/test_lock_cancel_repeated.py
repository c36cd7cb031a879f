"""A cancellation that arrives again during the take-back leaves no hold (issue 23, item 4).

``acquire_async`` cancelled while its attempt is in flight takes the attempt's
possible grant back before the cancellation goes on; ``downgrade_async`` sends
the downgrade once more and releases the read hold it made. Here the caller is
cancelled a second time while that clean-up runs (two ``cancel()`` calls a few
event-loop steps or about 1 ms apart), or at every step until it is done (as an
anyio cancel scope does). Before the fix the second cancellation cut the
clean-up off and the grant stayed for its whole TTL (30 s here).

For every lock kind (mutex, reentrant, read, write, downgrade) on the single
server and the cluster, each pattern of the sweep runs on a fresh name; after
the cancelled call has ended, a raw client must see no hold within a few
seconds (far below the TTL: the clean-up may finish in the background), and a
new lock object must then get the lock at once. Every loop is bounded.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from django_redislock.backends.redis import RedisLockBackend
from django_redislock.locking.mutex import Lock
from django_redislock.locking.readwrite import ReadWriteLock

from .conftest import RedisTarget
from .servers import RedisProcess
from .test_lock_cancellation import SlowReplies

TTL = 30.0
#: How long the clean-up may take to land after the cancelled call ended (a loaded machine).
SETTLE = 3.0
KINDS = ("mutex", "reentrant", "read", "write", "downgrade")

#: (how, first, second): "steps": cancel after ``first`` event-loop steps, again ``second``
#: steps later; "ms": the same in seconds; "every": from ``first`` steps on, cancel at every
#: step (``second`` = 0) or every ``second`` seconds until the call is done.
PATTERNS: list[tuple[str, float, float]] = [
    *[("steps", n, m) for n in range(6) for m in (1, 2)],
    *[("ms", d, 0.001) for d in (0.0, 0.0002, 0.0005, 0.001, 0.002)],
    *[("every", n, 0.0) for n in range(4)],
    *[("every", n, 0.0005) for n in range(4)],
]
#: At least this many calls of a sweep must be cut by the cancellation (not completed first).
MIN_CUT = 2


@pytest.fixture
def slow_proxies() -> Iterator[list[SlowReplies]]:
    started: list[SlowReplies] = []
    yield started
    for proxy in started:
        proxy.stop()


async def _steps(count: float) -> None:
    for _ in range(int(count)):
        await asyncio.sleep(0)


async def _cancel(task: asyncio.Future[Any], how: str, first: float, second: float) -> None:
    if how == "ms":
        await asyncio.sleep(first)
        task.cancel()
        await asyncio.sleep(second)
        task.cancel()
        return
    await _steps(first)
    task.cancel()
    if how == "steps":
        await _steps(second)
        task.cancel()
        return
    stop = time.monotonic() + 5.0
    for _ in range(20000):  # "every": until the call is done (bounded in count and time)
        if task.done() or time.monotonic() > stop:
            return
        await asyncio.sleep(second)
        task.cancel()


class Case:
    """One kind of lock on a fresh name, and what a raw client sees of it."""

    def __init__(self, target: RedisTarget, backend: Any, kind: str) -> None:
        self.target = target
        self.backend = backend
        self.kind = kind
        self.name = f"twice:{kind}:{uuid.uuid4().hex[:10]}"
        self.rw = (
            ReadWriteLock(backend, self.name) if kind in ("read", "write", "downgrade") else None
        )

    async def call(self, started: asyncio.Event) -> Any:
        """The call the sweep cancels (for a downgrade: after the write hold was taken)."""
        if self.rw is None:
            lock = Lock(self.backend, self.name, ttl=TTL, reentrant=self.kind == "reentrant")
            started.set()
            return await lock.acquire_async(blocking=False)
        if self.kind == "read":
            started.set()
            return await self.rw.read(ttl=TTL).acquire_async(blocking=False)
        writer = self.rw.write(ttl=TTL)
        if self.kind == "write":
            started.set()
            return await writer.acquire_async(blocking=False)
        assert await writer.acquire_async(blocking=False)
        started.set()
        return await writer.downgrade_async()

    def held(self) -> bool:
        raw = self.target.raw
        if self.rw is None:
            lock = Lock(self.backend, self.name)
            return bool(raw.exists(lock._key))
        keys = self.rw.keys
        return bool(raw.exists(keys.writer)) or bool(raw.zcard(keys.readers))

    def describe(self) -> str:
        raw = self.target.raw
        if self.rw is None:
            key = Lock(self.backend, self.name)._key
            return f"{raw.hgetall(key)}, PTTL {raw.pttl(key)} ms"
        keys = self.rw.keys
        return f"writer {raw.hgetall(keys.writer)}, readers {raw.zrange(keys.readers, 0, -1)}"

    async def acquirable(self) -> bool:
        if self.rw is None:
            lock: Any = Lock(self.backend, self.name, ttl=TTL)
        else:
            lock = self.rw.write(ttl=TTL)
        if not await lock.acquire_async(blocking=False):
            return False
        await lock.release_async()
        return True


async def _one(target: RedisTarget, backend: Any, kind: str, pattern: Any) -> str | None:
    """Run one case; None when the call completed before a cancel cut it, else what is wrong."""
    case = Case(target, backend, kind)
    started = asyncio.Event()
    task = asyncio.ensure_future(case.call(started))
    waiter = asyncio.ensure_future(started.wait())
    await asyncio.wait([waiter, task], return_when=asyncio.FIRST_COMPLETED)
    waiter.cancel()
    await _cancel(task, *pattern)
    await asyncio.wait([task], timeout=10)
    assert task.done(), f"{kind} {pattern}: the cancelled call did not end"
    if not task.cancelled():
        task.result()  # an error other than the cancellation is the test's
        return None  # completed: its hold is a normal one
    # The clean-up may go on in the background after the call ended: wait (bounded) until
    # no other task runs on this loop, then give the servers' state time to settle.
    deadline = time.monotonic() + SETTLE
    while len(asyncio.all_tasks()) > 1 and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    while case.held() and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    if case.held():
        return f"{kind} {pattern}: a hold is left after the cancelled call: {case.describe()}"
    if not await case.acquirable():
        return f"{kind} {pattern}: the lock is not free"
    return ""


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("where", ["single", "cluster"])
def test_cancelled_again_during_the_take_back_leaves_no_hold(
    request: pytest.FixtureRequest, slow_proxies: list[SlowReplies], where: str, kind: str
) -> None:
    """On the single server, replies come through a proxy that holds each for 5 ms, so the
    first cancel lands while the attempt is applied but unanswered; the cluster (whose
    redirections would bypass a proxy) is cut at the first few event-loop steps."""
    target: RedisTarget = request.getfixturevalue(f"{where}_target")
    backend = target.lock_backend()
    if where == "single":
        server: RedisProcess = request.getfixturevalue("redis_server")
        slow_proxies.append(SlowReplies(server.port, delay=0.005))
        backend = RedisLockBackend("twice", {"LOCATION": slow_proxies[0].url})

    async def sweep() -> tuple[list[str], int]:
        problems: list[str] = []
        cut = 0
        for pattern in PATTERNS:
            found = await _one(target, backend, kind, pattern)
            if found is None:
                completed.append(pattern)
                continue
            cut += 1
            if found:
                problems.append(found)
        return problems, cut

    completed: list[Any] = []
    problems, cut = asyncio.run(sweep())
    # A loaded machine answers before the loop's first steps more often (the reply is already
    # in the socket when read), so fewer calls are cut: sweep again, at most twice, until
    # enough were (CI's Python 3.12 run once cut 1 of 25 cluster downgrades).
    for _ in range(2):
        if cut >= MIN_CUT or problems:
            break
        completed.clear()
        more, more_cut = asyncio.run(sweep())
        problems, cut = problems + more, cut + more_cut
    assert not problems, f"{len(problems)} of {cut} cancelled calls left a hold: {problems[:5]}"
    assert cut >= MIN_CUT, f"only {cut} of {len(PATTERNS)} calls were cut: {completed}"


@pytest.mark.parametrize("kind", ["mutex", "write"])
def test_a_loop_that_ends_right_after_a_double_cancel_still_takes_back(
    request: pytest.FixtureRequest, slow_proxies: list[SlowReplies], kind: str
) -> None:
    """``asyncio.run`` returns right after the call was cancelled twice: closing the loop
    cancels the clean-up still running in the background, which still takes back."""
    target: RedisTarget = request.getfixturevalue("single_target")
    server: RedisProcess = request.getfixturevalue("redis_server")
    slow_proxies.append(SlowReplies(server.port, delay=0.005))
    backend = RedisLockBackend("twice", {"LOCATION": slow_proxies[0].url})
    cut = 0
    left: list[str] = []
    for first in range(6):
        case = Case(target, backend, kind)

        async def run(case: Case, first: int) -> bool:
            started = asyncio.Event()
            task = asyncio.ensure_future(case.call(started))
            await started.wait()
            await _cancel(task, "steps", first, 1)
            await asyncio.wait([task], timeout=10)
            return task.cancelled()  # the loop closes now, cancelling what still runs

        if not asyncio.run(run(case, first)):
            continue
        cut += 1
        deadline = time.monotonic() + SETTLE
        while case.held() and time.monotonic() < deadline:
            time.sleep(0.01)
        if case.held():
            left.append(f"{kind} after {first} steps: {case.describe()}")
    assert not left, left
    assert cut >= 1
