"""How an ``async`` pool run calls its task, and what asyncio would not carry back.

An ``async def`` task is awaited within its hard limit (``asyncio.wait_for``: the coroutine
is cancelled); a sync task runs in a daemon thread of its own with the thread pool's limits
(:func:`in_thread`, not ``asyncio.to_thread``, whose threads a stopping process joins).
``KeyboardInterrupt``, ``SystemExit`` and ``GeneratorExit`` raised by a task travel as
:class:`Escaped`, so the pool records them as the task's failure instead of asyncio ending
its loop (see :mod:`.pool_async`, which uses these for each claimed task).

What a run keeps while it waits is kept small: an ``async def`` task without a hard limit
is awaited as it is (no coroutine of ours around it), and calls handed to a thread take
their arguments (no closure, whose cells every run would make whether or not it needs
them). Each object a waiting run holds counts towards the garbage collector's next pass:
at 32 runs at once, the 47 a run held made one pass every 36-63 runs, the 22 it holds
now one every 290-400, as in the thread pool (docs/benchmarks-history.md, "The async pool").
"""

from __future__ import annotations

import asyncio
import inspect
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from django.db import connections

from .control import Control, enter, leave
from .limits import Run
from .payloads import Runnable, task_path
from .queue import Queue
from .records import Task

if TYPE_CHECKING:
    from .worker import Worker

R = TypeVar("R")
P = ParamSpec("P")

#: What asyncio does not carry as a task's exception: it re-raises ``KeyboardInterrupt`` and
#: ``SystemExit`` out of the loop (ending it), and a ``GeneratorExit`` thrown into a chain of
#: awaits closes the coroutines instead. These travel as :class:`Escaped`.
UNCARRIED = (KeyboardInterrupt, SystemExit, GeneratorExit)


class Escaped(Exception):
    """A task's ``BaseException`` on its way to :func:`execute_async`, which records it."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(repr(error))
        self.error = error


async def carried(coroutine: Coroutine[Any, Any, R]) -> R:
    """Await ``coroutine``, carrying what asyncio would not (see :data:`UNCARRIED`)."""
    try:
        return await coroutine
    except UNCARRIED as exc:
        raise Escaped(exc) from None


def call_async(
    worker: Worker,
    queue: Queue,
    task: Task,
    fn: Runnable,
    *,
    limits: tuple[float | None, float | None],
    watch: Any,
    control: Control,
) -> Awaitable[Any]:
    """What a run awaits: an ``async def`` task's own coroutine (within its hard limit, if it
    has one), or a sync task in a thread of its own.

    Called inside the run's ``try``: an ``async def`` task called with arguments it does not
    take raises here, and that is the run's failure.
    """
    coroutine = coroutine_of(fn, task.payload)
    if coroutine is None:
        return in_thread(
            sync_run, worker, queue, task, fn, limits=limits, watch=watch, control=control
        )
    hard = limits[0]
    if hard is None:
        return coroutine  # awaited by the run itself: nothing of ours around it
    return limited(worker, queue, task, coroutine, hard=hard, watch=watch)


async def limited(
    worker: Worker,
    queue: Queue,
    task: Task,
    coroutine: Coroutine[Any, Any, Any],
    *,
    hard: float,
    watch: Any,
) -> Any:
    """Await ``coroutine`` within ``hard`` seconds (``asyncio.wait_for`` cancels it)."""
    # the limit watch only notices a coroutine that blocks the loop past hard + grace
    run = Run(None, hard, f"task {task.id} ({task_path(task)}) of {queue.name!r}")
    run.raise_in_thread, run.watch = False, watch
    worker._limits.add(run)
    try:
        return await asyncio.wait_for(carried(coroutine), hard)  # wait_for makes a Task
    except asyncio.TimeoutError:
        if time.monotonic() - run.started >= hard:  # not a TimeoutError of the task's own
            raise run.hard_error() from None
        raise
    finally:
        run.active = False
        worker._limits.discard(run)


def sync_run(
    worker: Worker,
    queue: Queue,
    task: Task,
    fn: Runnable,
    *,
    limits: tuple[float | None, float | None],
    watch: Any,
    control: Control,
) -> Any:
    """A sync task in its thread, within its limits; the thread's DB connections closed after."""
    token = enter(control)  # a new thread does not inherit the loop's context
    try:
        control.bind()
        result = worker._call(queue, task, fn, limits, watch)
        control.close()
        return result
    finally:
        control.close()
        leave(token)
        connections.close_all()


def coroutine_of(fn: Runnable, payload: Any) -> Coroutine[Any, Any, Any] | None:
    """The coroutine of an ``async def`` ``@task`` call, or None for anything else."""
    target = getattr(fn, "fn", None)
    if not inspect.iscoroutinefunction(target) or not isinstance(payload, dict):
        return None
    coroutine: Coroutine[Any, Any, Any] = target(
        *payload.get("args", ()), **payload.get("kwargs", {})
    )
    return coroutine


async def in_thread(call: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
    """Run ``call(*args, **kwargs)`` in a new daemon thread and await its result (the loop
    goes on meanwhile).

    Not ``asyncio.to_thread``: its executor's threads are joined when the process
    exits, so one task that cannot be ended would keep a stopping worker alive.
    """
    loop = asyncio.get_running_loop()
    future: asyncio.Future[R] = loop.create_future()

    def settle(result: Any, error: BaseException | None) -> None:
        if future.done():
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)

    def target() -> None:
        try:
            result = call(*args, **kwargs)
        except BaseException as exc:  # handed to the awaiting coroutine, which records it
            carry = Escaped(exc) if isinstance(exc, UNCARRIED) else exc
            loop.call_soon_threadsafe(settle, None, carry)
        else:
            loop.call_soon_threadsafe(settle, result, None)

    threading.Thread(target=target, name="redislock-sync", daemon=True).start()
    return await future
