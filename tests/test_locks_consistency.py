"""Reentrant and read-write holds stay consistent across expiries, re-entries and downgrades."""

from __future__ import annotations

import asyncio
import gc
import re
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from django_redislock import signals
from django_redislock.exceptions import LockLost

from .conftest import RedisTarget


def collect_lost() -> tuple[list[tuple[str, int]], Any]:
    lost: list[tuple[str, int]] = []

    def on_lost(*, name: str, fence: int, **kwargs: Any) -> None:
        lost.append((name, fence))

    return lost, on_lost


def in_thread(func: Any) -> Any:
    out: list[Any] = []
    thread = threading.Thread(target=lambda: out.append(func()))
    thread.start()
    thread.join(10)
    return out[0]


def test_a_reentry_after_the_hold_expired_is_a_new_grant(redis_target: RedisTarget) -> None:
    backend = redis_target.lock_backend()
    lock = backend.lock("re-expired", ttl=0.2, reentrant=True, watchdog=False)
    lost, on_lost = collect_lost()
    signals.lock_lost.connect(on_lost, weak=False)
    try:
        assert lock.acquire()
        old = lock.fence
        time.sleep(0.35)  # expired; someone else takes it and gives it back meanwhile
        assert in_thread(lambda: backend.lock("re-expired", ttl=5).acquire(blocking=False))
        backend.force_release("re-expired")
        assert lock.acquire()
        # Not a re-entry of the old hold: the old one is reported lost, the new one is
        # counted and fenced on its own.
        assert lost == [("re-expired", old)]
        assert lock.count == 1 and lock.fence > old
        lock.release()
        assert lock.count == 0 and not lock.locked()  # nothing left orphaned
    finally:
        signals.lock_lost.disconnect(on_lost)


def test_a_shorter_reentry_does_not_shorten_the_hold(redis_target: RedisTarget) -> None:
    backend = redis_target.lock_backend()
    outer = backend.lock("re-short", ttl=5, reentrant=True)
    with outer:
        inner = backend.lock("re-short", ttl=0.2, reentrant=True)
        with inner:
            pass
        assert inner.acquire()  # held by inner again, same owner (this thread)
        time.sleep(0.4)
        assert not in_thread(lambda: backend.lock("re-short", ttl=5).acquire(blocking=False))
        assert outer.owned()
        inner.release()
    assert not outer.locked()


def test_a_downgrade_with_an_explicit_owner_has_its_own_read_hold(
    redis_target: RedisTarget,
) -> None:
    backend = redis_target.lock_backend()
    rw = backend.read_write_lock("rw-owner", owner="report-7")
    first = rw.write(ttl=0.2, watchdog=False)
    assert first.acquire()
    old_reader = first.downgrade(ttl=0.2)
    time.sleep(0.35)  # the downgraded read hold expired
    second = rw.write(ttl=5)
    assert second.acquire()
    reader = second.downgrade(ttl=5)
    # The expired hold's release must not end the newer read hold of the same owner.
    with pytest.raises(LockLost):
        old_reader.release()
    assert rw.state()["readers"] == 1
    assert not rw.write().acquire(blocking=False)  # no writer while a reader reads
    reader.release()
    last = rw.write(ttl=5)
    assert last.acquire(blocking=False)
    last.release()


def test_downgrade_inside_with_blocks(redis_target: RedisTarget) -> None:
    backend = redis_target.lock_backend()
    rw = backend.read_write_lock("rw-with", ttl=5)
    with rw.write() as writer:
        with writer.downgrade() as reader:
            assert rw.state() == {"writer": False, "readers": 1, "writer_waiting": False}
            assert reader.fence == writer.fence if writer._hold else reader.fence > 0
            assert not rw.write().acquire(blocking=False)
        assert rw.state()["readers"] == 0
    # A bare downgrade inside the write block: leaving it releases nothing downgraded.
    with rw.write() as writer:
        reader = writer.downgrade()
        assert rw.state()["readers"] == 1
    assert rw.state()["readers"] == 1 and reader.held_by_me()
    reader.release()
    assert rw.state() == {"writer": False, "readers": 0, "writer_waiting": False}
    with rw.write(timeout=1):  # a rerun on the same name gets in at once
        pass


def test_the_docs_downgrade_pattern_runs(redis_target: RedisTarget) -> None:
    text = (Path(__file__).resolve().parent.parent / "docs" / "locks.md").read_text("utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, re.DOTALL)
    [block] = [b for b in blocks if "with writer.downgrade() as reader" in b]
    seen: list[tuple[dict[str, Any], int]] = []
    namespace: dict[str, Any] = {"locks": {"default": redis_target.lock_backend()}, "report": {}}

    def rebuild(report: dict[str, Any]) -> None:
        assert namespace["rw"].state()["writer"]
        report["built"] = True

    def publish(report: dict[str, Any], fence: int) -> None:
        assert namespace["rw"].state() == {"writer": False, "readers": 1, "writer_waiting": False}
        seen.append((dict(report), fence))

    namespace.update(rebuild=rebuild, publish=publish)
    exec(block.replace("from django_redislock import locks\n", ""), namespace)  # ours, not settings
    assert seen and seen[0][0] == {"built": True} and seen[0][1] > 0
    assert namespace["rw"].state() == {"writer": False, "readers": 0, "writer_waiting": False}


def test_async_downgrade_inside_async_with(redis_target: RedisTarget) -> None:
    backend = redis_target.lock_backend()
    rw = backend.read_write_lock("rw-async-with", ttl=5)

    async def main() -> None:
        async with rw.write() as writer, await writer.downgrade_async():
            assert (await rw.state_async())["readers"] == 1
        assert (await rw.state_async())["readers"] == 0

    asyncio.run(main())


def test_a_new_thread_never_inherits_an_ended_threads_reentrant_hold(
    redis_target: RedisTarget,
) -> None:
    backend = redis_target.lock_backend()
    idents: list[int] = []

    def take_and_end() -> None:
        idents.append(threading.get_ident())
        assert backend.lock("orphan-thread", ttl=5, reentrant=True).acquire()

    in_thread(take_and_end)

    def try_it() -> bool | None:
        if threading.get_ident() != idents[0]:
            return None
        return backend.lock("orphan-thread", ttl=5, reentrant=True).acquire(blocking=False)

    for _ in range(50):  # a later thread often gets the ended thread's ident
        result = in_thread(try_it)
        if result is not None:
            break
    if result is None:
        pytest.skip("no thread ident was reused here")
    assert result is False


def test_a_new_task_never_inherits_an_ended_tasks_reentrant_hold(
    redis_target: RedisTarget,
) -> None:
    backend = redis_target.lock_backend()

    async def take() -> int:
        task = asyncio.current_task()
        assert await backend.lock("orphan-task", ttl=5, reentrant=True).acquire_async()
        return id(task)

    async def attempt(old: int) -> bool | None:
        if id(asyncio.current_task()) != old:
            return None
        lock = backend.lock("orphan-task", ttl=5, reentrant=True)
        return await lock.acquire_async(blocking=False)

    async def main() -> bool | None:
        old = await asyncio.ensure_future(take())
        # a later task often gets the ended task's id(); a full collection of a large test
        # process's heap costs up to half a second, so the search is bounded in time too
        deadline = time.monotonic() + 3.0
        for _ in range(200):
            if time.monotonic() > deadline:
                break
            gc.collect()
            result = await asyncio.ensure_future(attempt(old))
            if result is not None:
                return result
        return None

    result = asyncio.run(main())
    if result is None:
        pytest.skip("no task id was reused here")
    assert result is False
