"""Time limits of task runs: how each pool ends a run that takes too long.

A run has a soft limit (:class:`~django_redislock.exceptions.SoftTimeLimitExceeded`
is raised inside it, an ``Exception`` it may catch to clean up) and a hard one
(:class:`~django_redislock.exceptions.TimeLimitExceeded`, a ``BaseException``:
the run is recorded as a failed attempt). Both come from ``@task(time_limit=...,
soft_time_limit=...)`` or else the alias's ``TASK_TIME_LIMIT`` /
``TASK_SOFT_TIME_LIMIT`` (``None``: no limit).

How the exception gets into the run:

* ``solo`` (the main thread): ``SIGALRM`` from ``setitimer(ITIMER_REAL)``
  (:func:`alarm`). The handler runs between two bytecodes of the task, and a
  blocking ``sleep``, ``select`` or socket read is interrupted for it (PEP 475);
* ``thread`` and the sync tasks of ``async``: :class:`LimitWatch` sets the
  exception asynchronously in the task's thread (``PyThreadState_SetAsyncExc``).
  It is raised when the thread next runs Python code: a call blocked in C
  (``time.sleep``, a socket read, a C extension's loop) gets it only when it returns.

Both can fail to end a run: a C call that never returns to Python, or a task that
blocks ``SIGALRM``. :class:`LimitWatch` calls its ``on_hung`` callback once a run
outlives its hard limit by :data:`HARD_LIMIT_GRACE`; the worker then stops (see
docs/workers.md, "Time limits"). Until the process exits, the lease keeper keeps
renewing that run's lease, so no other worker can run the task while it still runs.
"""

from __future__ import annotations

import contextlib
import logging
import math
import signal
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ..conf import option_limit_errors
from ..exceptions import SoftTimeLimitExceeded, TimeLimitExceeded
from ..validation import check_limits

# The checks of a limit pair live with the other value checks (``check_limits``, an
# argument) and the other cross-option checks of an alias (``option_limit_errors``).
__all__ = [
    "HARD_LIMIT_GRACE",
    "WATCH_INTERVAL",
    "LimitWatch",
    "Run",
    "alarm",
    "check_limits",
    "keep_for",
    "limits_of",
    "option_limit_errors",
]

logger = logging.getLogger("django_redislock.worker")

#: Seconds a run may outlive its hard limit before the worker gives up on ending it.
HARD_LIMIT_GRACE = 2.0
#: How often the limit watch looks at the running tasks (seconds).
WATCH_INTERVAL = 0.05

R = TypeVar("R")

#: The ``(hard, soft)`` of a run without time limits.
NO_LIMITS: tuple[None, None] = (None, None)


def limits_of(fn: Any, options: Mapping[str, Any]) -> tuple[float | None, float | None]:
    """The ``(hard, soft)`` limits of a run: the task's own, else the alias's options.

    Read with ``getattr`` because a Django tasks-framework call has no limits of its own.
    """
    hard = getattr(fn, "time_limit", None)
    soft = getattr(fn, "soft_time_limit", None)
    if hard is None:
        hard = options.get("TASK_TIME_LIMIT")
    if soft is None:
        soft = options.get("TASK_SOFT_TIME_LIMIT")
    if hard is None and soft is None:
        return NO_LIMITS  # shared: a run keeps no tuple of its own for it
    if hard is not None and soft is not None and soft >= hard:
        soft = None  # a task's own hard limit below the alias's soft one: the soft one is moot
    return hard, soft


def keep_for(lease: float, hard: float | None) -> float:
    """How long the lease keeper renews a run: while it lives, or past its hard limit + grace.

    A run without a hard limit is renewed for as long as it runs in this (live) process:
    its lease only has to outlast the worker, not the run, so a task longer than its
    lease is neither handed to another worker nor dead-lettered for it. With a hard
    limit, one more lease beyond the grace: a run still going then is held (renewed
    until the process exits), and that renewal must land before the lease it extends
    runs out.
    """
    return math.inf if hard is None else max(lease, hard + HARD_LIMIT_GRACE + lease)


@dataclass(eq=False)
class Run:
    """One limited run: which thread runs it, since when, and what was sent to it."""

    soft: float | None
    hard: float | None
    label: str
    thread: int = field(default_factory=threading.get_ident)
    started: float = field(default_factory=time.monotonic)
    active: bool = True
    sent: int = 0
    hung: bool = False
    raise_in_thread: bool = True
    #: the lease keeper's watch of this run (held when the run cannot be ended)
    watch: Any = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def call(self, fn: Callable[[], R]) -> R:
        """Run ``fn``; a limit exception that lands after it returned is absorbed here."""
        try:
            return fn()
        finally:
            for _ in range(4):  # at most two exceptions are ever sent to a run
                try:
                    self._finish()
                    break
                except (SoftTimeLimitExceeded, TimeLimitExceeded):
                    continue  # it fired inside _finish: the run is over, finish again

    def _finish(self) -> None:
        with self.lock:
            self.active = False
        if self.sent and self.raise_in_thread:
            set_async_exc(self.thread, None)  # drop one that is pending, if any

    def soft_error(self) -> SoftTimeLimitExceeded:
        return SoftTimeLimitExceeded(f"{self.label} ran longer than its soft limit {self.soft:g} s")

    def hard_error(self) -> TimeLimitExceeded:
        return TimeLimitExceeded(f"ran longer than {self.hard:g} s (time_limit)")


def set_async_exc(thread: int, exc: BaseException | None) -> int:
    """Raise ``exc`` in ``thread`` when it next runs Python code (None clears a pending one).

    CPython takes a class there, not an instance: a subclass named like ``exc``'s
    class is made whose instances carry ``exc``'s message. ``ctypes`` is imported here, by
    the first limit that fires, not with the worker (it is a few ms of every start-up).
    """
    import ctypes

    value: Any = None
    if exc is not None:
        value = ctypes.py_object(carrying(type(exc), str(exc)))
    return int(ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread), value))


def carrying(base: type[BaseException], message: str) -> type[BaseException]:
    """A subclass of ``base``, shown under ``base``'s name, raised with ``message``."""

    def __init__(self: BaseException, *args: Any) -> None:
        base.__init__(self, *(args or (message,)))

    namespace = {"__init__": __init__, "__module__": base.__module__}
    made = type(base.__name__, (base,), namespace)
    made.__qualname__ = base.__qualname__
    return made


class LimitWatch:
    """One daemon thread per worker that enforces the limits of runs in other threads.

    :meth:`add` a :class:`Run` when it starts (in its thread) and :meth:`Run.call` it.
    The watch raises the soft and hard exceptions in the run's thread (unless the
    run's ``raise_in_thread`` is off: the solo pool raises them with ``SIGALRM``),
    and calls ``on_hung(run)`` once when a run outlives its hard limit by
    :data:`HARD_LIMIT_GRACE`.
    """

    def __init__(self, on_hung: Callable[[Run], None]) -> None:
        self.on_hung = on_hung
        self._runs: set[Run] = set()
        self._guard = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def add(self, run: Run) -> None:
        with self._guard:
            self._runs.add(run)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._loop, name="redislock-limits", daemon=True
                )
                self._thread.start()

    def discard(self, run: Run) -> None:
        with self._guard:
            self._runs.discard(run)

    def stop(self) -> None:
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(2)

    def _loop(self) -> None:
        while not self._stop.wait(WATCH_INTERVAL):
            with self._guard:
                runs = list(self._runs)
            for run in runs:
                self._check(run, time.monotonic() - run.started)

    def _check(self, run: Run, elapsed: float) -> None:
        with run.lock:
            if not run.active:
                return
            soft_due = run.soft is not None and elapsed >= run.soft and not run.sent
            if run.raise_in_thread and soft_due:
                run.sent = 1
                set_async_exc(run.thread, run.soft_error())
            hard_due = run.hard is not None and elapsed >= run.hard and run.sent < 2
            if run.raise_in_thread and hard_due:
                run.sent = 2
                set_async_exc(run.thread, run.hard_error())
            hung = run.hard is not None and elapsed >= run.hard + HARD_LIMIT_GRACE
        if hung and not run.hung:
            run.hung = True
            logger.critical(
                "%s is still running %.1fs after its time limit of %g s and cannot be stopped "
                "(a call blocked outside Python?)",
                run.label,
                elapsed - (run.hard or 0.0),
                run.hard,
            )
            self.on_hung(run)


@contextlib.contextmanager
def alarm(run: Run) -> Iterator[None]:
    """Raise the limits of ``run`` with ``SIGALRM`` while the block runs (main thread only).

    The soft limit fires first (if any) and re-arms the timer for the hard one. The
    handler raises only while the run is active, so a late signal never hits the
    worker's own bookkeeping.
    """
    first = run.soft if run.soft is not None else run.hard
    if first is None or threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        if not run.active:
            return
        if run.soft is not None and not run.sent:
            run.sent = 1
            if run.hard is not None:
                signal.setitimer(signal.ITIMER_REAL, max(run.hard - run.soft, 0.001))
            raise run.soft_error()
        run.sent = 2
        raise run.hard_error()

    previous = signal.signal(signal.SIGALRM, handler)
    signal.setitimer(signal.ITIMER_REAL, first)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
