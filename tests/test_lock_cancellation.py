"""The cancellation sweep: every async lock operation cancelled at each of its await points.

Each operation (``acquire_async``, ``release_async``, ``extend_async`` and an
``async with`` block) is cancelled at its Nth cut point, for N = 0, 1, 2, ...
until the operation completes before the cancel. A cut point is, by mode:

* ``await``: the operation's Nth suspension (:class:`CancelAt`), through proxies
  that hold every reply for 20 ms, so "request applied, reply not read yet" is
  hit on every run;
* ``time``: N x 5 ms after the start, through the same proxies (for Redlock
  this lands inside the attempt's grant, fence and release round trips, which
  run shielded from the caller's cancellation);
* ``loop``: the Nth event-loop step, straight to the servers (where it lands
  then varies with timing; the cluster is swept this way only, since its
  redirections would bypass a proxy).

After each case, once the library's clean-ups of the cancelled call have finished (a
cancelled call waits for its take-back or its resent release a bounded time only; on a
loaded machine the clean-up can land after the cancellation went on), a raw client (not
the library) checks the servers:

* every hold on the lock belongs to the lock object and that object knows it
  holds it (no orphan grant, nothing the watchdog renews for nobody);
* a cancelled acquire, release or ``async with`` leaves the object not holding;
  a cancelled extend leaves it holding, and Redis agrees;
* another owner then acquires within TTL + margin.

It runs on the single server, the cluster and the 5 Redlock masters. The
locks use the watchdog, so a grant that something still renews would also
keep the other owner out.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Generator, Iterator
from typing import Any

import pytest

from django_redislock.backends.redis import RedisLockBackend
from django_redislock.backends.redlock import RedlockBackend
from django_redislock.locking.base import BaseLock
from django_redislock.locking.watchdog import watchdog

from .conftest import RedisTarget, cleanups_finished
from .servers import RedisProcess, free_port

TTL = 2.0
#: Beyond the TTL, how long another owner may have to wait for the lock (a loaded machine).
MARGIN = 2.0
#: The most event-loop steps one operation is given before the sweep gives up on completing.
MAX_STEPS = 3000

#: How long a cancelled call's clean-up may take to finish in the background (a loaded machine;
#: each of its calls is bounded by the client's socket timeout).
CLEANUP_DEADLINE = 30.0

#: The "time" mode cuts after this many seconds times the step number.
TIME_STEP = 0.005
#: How many times each cut point is tried, by mode (where a "time" or "loop" cut lands within
#: the operation varies from run to run; an "await" cut does not).
REPEATS = {"await": 1, "time": 2, "loop": 4}

OPERATIONS = ("acquire", "release", "extend", "async with", "waiting acquire")
#: How long the other holder of a "waiting acquire" keeps the lock (it lets it expire).
HOLDER_TTL = 0.3


class SlowReplies:
    """A loopback TCP proxy, on its own thread and loop, that holds every reply for ``delay``.

    Through it a request has always reached the server before its reply can be
    read, so the sweep's cut at "reply awaited" lands there on every run: the
    window in which a cancelled call has changed Redis without knowing it.
    """

    def __init__(self, upstream_port: int, delay: float = 0.02) -> None:
        self.upstream_port = upstream_port
        self.delay = delay
        self.port = free_port()
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True, name="slow-replies")
        self.thread.start()
        assert self.ready.wait(10), "the proxy did not start"

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        server = self.loop.run_until_complete(
            asyncio.start_server(self._serve, "127.0.0.1", self.port)
        )
        self.ready.set()
        self.loop.run_forever()
        server.close()
        self.loop.run_until_complete(server.wait_closed())
        self.loop.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)

        async def pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter, delay: float) -> None:
            try:
                while data := await src.read(65536):
                    if delay:
                        await asyncio.sleep(delay)
                    dst.write(data)
                    await dst.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                dst.close()

        await asyncio.gather(pump(reader, up_writer, 0.0), pump(up_reader, writer, self.delay))

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self._shutdown(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)

    async def _shutdown(self) -> None:
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


class Target:
    """A backend to sweep and raw clients to look at its keys with."""

    def __init__(self, kind: str, backend: Any, raws: list[Any]) -> None:
        self.kind = kind
        self.backend = backend
        self.raws = raws

    def holders(self, lock: BaseLock) -> list[str | None]:
        """The owner each server has stored for ``lock`` (None: no hold there)."""
        key = lock._key  # type: ignore[attr-defined]
        owners = []
        for raw in self.raws:
            owner = raw.hget(key, "o")
            owners.append(owner.decode() if owner is not None else None)
        return owners

    def quorum(self) -> int:
        return len(self.raws) // 2 + 1


def redlock_backend(urls: list[str]) -> RedlockBackend:
    return RedlockBackend(
        "quorum",
        {
            "LOCATION": urls,
            "KEY_PREFIX": f"sweep{uuid.uuid4().hex[:8]}",
            "OPTIONS": {"QUARANTINE_FRESH_MASTERS": False, "MASTER_TIMEOUT": 2.0},
        },
    )


@pytest.fixture
def proxies() -> Iterator[list[SlowReplies]]:
    started: list[SlowReplies] = []
    yield started
    for proxy in started:
        proxy.stop()


def sweep_target(
    request: pytest.FixtureRequest, kind: str, slow: bool, proxies: list[SlowReplies]
) -> Target:
    """The backend to sweep; with ``slow``, its servers are reached through slow proxies."""
    if kind == "redlock":
        servers: list[RedisProcess] = request.getfixturevalue("redlock_servers")
        urls = [server.url for server in servers]
        if slow:
            proxies += [SlowReplies(server.port) for server in servers]
            urls = [proxy.url for proxy in proxies]
        raws = [server.client() for server in servers]
        return Target(kind, redlock_backend(urls), raws)
    redis_target: RedisTarget = request.getfixturevalue(f"{kind}_target")
    if slow:
        assert kind == "single", "a cluster's redirections would bypass a proxy"
        server: RedisProcess = request.getfixturevalue("redis_server")
        proxies.append(SlowReplies(server.port))
        backend = RedisLockBackend("sweep", {"LOCATION": proxies[0].url})
        return Target(kind, backend, [redis_target.raw])
    return Target(kind, redis_target.lock_backend(), [redis_target.raw])


class CancelAt:
    """Await a coroutine, cancelling the running task at the coroutine's ``n``-th suspension.

    ``task.cancel()`` is called just before the coroutine's ``n``-th yield to the
    event loop (n = 0: its first), so the :class:`asyncio.CancelledError` arrives
    exactly at that await, as a real cancellation does (the awaited future is
    cancelled). A coroutine that suspends fewer times completes normally.
    """

    def __init__(self, coro: Coroutine[Any, Any, Any], n: int) -> None:
        self.coro = coro
        self.n = n
        #: True once the cancel was requested (False: the coroutine suspended fewer times).
        self.requested = False

    def __await__(self) -> Generator[Any, Any, Any]:
        inner = self.coro.__await__()
        count = 0
        value: Any = None
        throw = False
        while True:
            try:
                yielded = inner.throw(value) if throw else inner.send(value)
            except StopIteration as stop:
                return stop.value
            if count == self.n:
                task = asyncio.current_task()
                assert task is not None
                task.cancel()
                self.requested = True
            count += 1
            try:
                value, throw = (yield yielded), False
            except BaseException as exc:  # handed on to the coroutine
                value, throw = exc, True


async def one_case(
    target: Target, operation: str, steps: int, mode: str
) -> tuple[bool, list[str], bool]:
    """Cancel ``operation`` at its ``steps``-th await (mode ``await``) or after ``steps``
    event-loop steps (mode ``loop``).

    Returns whether it was cut, what is wrong, and whether the cancel was sent at
    all (False: the operation completed before that point). A cancel may be sent
    and still not cut the operation: Python 3.11's ``asyncio.wait_for``, used by
    redis-py, lets a call that completed at the same moment return its result.

    A lock object belongs to the task that acquired it, so one task does the
    set-up, the operation and the checks.
    """
    started = asyncio.Event()
    finished = asyncio.Event()
    worker = asyncio.ensure_future(
        run_case(target, operation, steps if mode == "await" else None, started, finished)
    )
    began = asyncio.ensure_future(started.wait())
    await asyncio.wait([began, worker], return_when=asyncio.FIRST_COMPLETED)
    if not started.is_set():  # the set-up failed: its error is the test's
        began.cancel()
        return await worker
    requested = True
    if mode == "time":
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(finished.wait(), steps * TIME_STEP)
        requested = not finished.is_set()  # set with no await after the operation ends
        if requested:
            worker.cancel()
    if mode == "loop":
        for _ in range(steps):
            if finished.is_set():
                break
            await asyncio.sleep(0)
        requested = not finished.is_set()
        if requested:
            worker.cancel()
    cut, wrong, reached = await worker
    return cut, wrong, requested and reached


async def run_case(
    target: Target,
    operation: str,
    cancel_at: int | None,
    started: asyncio.Event,
    finished: asyncio.Event,
) -> tuple[bool, list[str], bool]:
    name = f"sweep:{uuid.uuid4().hex[:10]}"
    lock = target.backend.lock(name, ttl=TTL, watchdog=True)
    await lock.locked_async()  # connected before the cut: the await points do not move
    if operation in ("release", "extend"):
        assert await lock.acquire_async(blocking=False)
    holder_until = 0.0
    if operation == "waiting acquire":  # held elsewhere until it expires: the acquire waits
        holder = target.backend.lock(name, ttl=HOLDER_TTL, watchdog=False)
        assert await holder.acquire_async(blocking=False)
        holder_until = time.monotonic() + HOLDER_TTL

    async def body() -> None:
        async with lock:
            await asyncio.sleep(0)

    make: Callable[[], Awaitable[Any]] = {
        "acquire": lambda: lock.acquire_async(blocking=False),
        "release": lock.release_async,
        "extend": lambda: lock.extend_async(TTL),
        "async with": body,
        "waiting acquire": lambda: lock.acquire_async(timeout=TTL + MARGIN),
    }[operation]
    started.set()
    cut = False
    stepper = None if cancel_at is None else CancelAt(make(), cancel_at)  # type: ignore[arg-type]
    try:
        await (make() if stepper is None else stepper)
    except asyncio.CancelledError:
        cut = True
    finished.set()
    settled = await cleanups_finished(CLEANUP_DEADLINE)
    await asyncio.sleep(max(0.0, holder_until + 0.05 - time.monotonic()))  # the holder is gone
    reached = stepper is None or stepper.requested
    wrong = [] if settled else [f"a clean-up did not finish within {CLEANUP_DEADLINE:g} s"]
    return cut, wrong + await check(target, lock, operation, cut), reached


async def check(target: Target, lock: BaseLock, operation: str, cut: bool) -> list[str]:
    """What is wrong in Redis and in ``lock`` after ``operation`` (cancelled if ``cut``)."""
    wrong: list[str] = []
    holders = target.holders(lock)
    held_by_me = lock.held_by_me()
    owner = lock._hold.owner if lock._hold is not None else None
    for where, holder in enumerate(holders):
        if holder is not None and (not held_by_me or holder != owner):
            wrong.append(f"server {where} keeps a grant that no lock object holds")
    if cut and operation != "extend" and held_by_me:
        wrong.append(f"the lock object still holds after a cancelled {operation}")
    if operation == "extend" or (not cut and operation.endswith("acquire")):
        if not held_by_me:
            wrong.append(f"the lock object lost its hold ({operation}, cut={cut})")
        elif sum(holder == owner for holder in holders) < target.quorum():
            wrong.append("the object holds but Redis does not")
    if held_by_me:
        await lock.release_async()
    other = target.backend.lock(lock.name, ttl=TTL, watchdog=False)
    began = time.monotonic()
    if not await other.acquire_async(timeout=TTL + MARGIN):
        wrong.append(f"another owner could not acquire within {TTL + MARGIN:g} s")
    else:
        await other.release_async()
    if time.monotonic() - began > TTL + MARGIN:
        wrong.append("another owner waited longer than TTL + margin")
    if watchdog.registered():
        wrong.append("the watchdog still renews a hold")
    return wrong


async def sweep(target: Target, operation: str, mode: str) -> dict[int, list[str]]:
    """Every cut point of ``operation`` in turn; the problems found, by step count."""
    problems: dict[int, list[str]] = {}
    for steps in range(MAX_STEPS):
        reached = False
        for _ in range(REPEATS[mode]):
            _, wrong, reached_now = await one_case(target, operation, steps, mode)
            reached = reached or reached_now
            if wrong:
                problems[steps] = wrong
        if not reached:
            print(f"{target.kind} {operation}: completed after {steps} {mode} steps")
            return problems
    raise AssertionError(f"{operation} never completed within {MAX_STEPS} loop steps")


#: Where the sweep runs: (kind, through slow proxies, cut mode). The "await" and "time" cuts
#: go through the proxies, so each await point is hit on every run ("time": after k x 5 ms,
#: which for Redlock lands inside its attempt's grant, fence and release round trips); the
#: "loop" cuts talk to the servers directly (where a step lands then varies with timing).
WHERE = [
    ("single", True, "await"),
    ("redlock", True, "await"),
    ("redlock", True, "time"),
    ("redlock", False, "loop"),
    ("single", False, "loop"),
    ("cluster", False, "loop"),
]


CASES = [
    pytest.param(
        (kind, slow, mode),
        operation,
        id=f"{kind}-{mode}-{operation.replace(' ', '-')}",
    )
    for kind, slow, mode in WHERE
    for operation in OPERATIONS
    # a wait is thousands of loop steps and dozens of 5 ms steps: cut only at its awaits
    if mode == "await" or operation != "waiting acquire"
]


@pytest.mark.parametrize(("where", "operation"), CASES)
def test_cancelled_at_every_await_leaves_redis_consistent(
    request: pytest.FixtureRequest,
    proxies: list[SlowReplies],
    where: tuple[str, bool, str],
    operation: str,
) -> None:
    kind, slow, mode = where
    target = sweep_target(request, kind, slow, proxies)
    problems = asyncio.run(sweep(target, operation, mode))
    assert problems == {}, "\n".join(
        f"cancelled after {steps} steps: {'; '.join(wrong)}" for steps, wrong in problems.items()
    )
