"""What runs inside one child of the ``drain_queue --pool process`` supervisor.

A child is forked from the supervisor after Django setup and task autodiscovery, so
it shares their memory copy-on-write. It then makes the process its own
(:func:`become_child`), runs an ordinary :class:`~.worker.Worker`, and ends with
``os._exit`` and one of the exit codes below, which tell the supervisor what to do
next. It never returns into the supervisor's code.

While it runs, it tells the supervisor, over a pipe, about each run of a task with a
hard time limit (:class:`Reporter`): the supervisor kills a child whose run outlives
its limit (see :mod:`.supervisor`). Runs without a limit are not reported, and a
child none of whose tasks can have one does not even listen for runs.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import random
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from types import FrameType
from typing import Any, NoReturn

from .. import signals
from .limits import limits_of
from .payloads import Runnable, runnable
from .queue import Queue
from .records import Task
from .registry import registry
from .stops import ForcedStop, WorkerGaveUp
from .worker import Summary, Worker

logger = logging.getLogger("django_redislock.worker.pool")

#: Exit codes of a child (anything else, or a signal, means it died).
EXIT_DONE = 0  # stopped, or --burst / --timeout ended: not restarted
EXIT_RECYCLE = 75  # --max-tasks-per-child or --max-memory-per-child: replaced at once
EXIT_GAVE_UP = 76  # Redis unreachable past the give-up time: the pool stops
EXIT_FORCED = 77  # a second stop signal interrupted it
EXIT_ERROR = 1  # an unexpected error: restarted with backoff

#: Signals the supervisor relays; blocked around fork() until the child handles them.
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
#: Stop signals this close together (seconds) are one stop to a child, not a stop and a
#: forced one: systemd's default ``KillMode=control-group`` signals every process of the
#: unit while the supervisor relays the same signal. The supervisor spaces its forcing
#: relay further apart than this (``supervisor.FORCE_SPACING``).
SAME_STOP = 0.4

WorkerFactory = Callable[[Callable[[Summary], None]], Worker]


def hard_time_limit(fn: Runnable, queue: Queue) -> float | None:
    """The hard time limit of one run in seconds: the task's own, else the alias's default."""
    limit = limits_of(fn, queue.backend.options)[0]
    return None if limit is None else float(limit)


def limits_possible(queues: Iterable[Queue]) -> bool:
    """Whether any run of these queues can have a hard limit (if not, none is reported).

    Every task module was imported before the fork, so the registry is complete; a
    child whose tasks have no limit then spares every run the ``task_started``
    receiver (a few microseconds each).
    """
    if any(queue.backend.options.get("TASK_TIME_LIMIT") is not None for queue in queues):
        return True
    return any(getattr(fn, "time_limit", None) is not None for fn in registry.values())


def rss_megabytes() -> float:
    """This process's resident memory in MB (``/proc``; else the peak from ``getrusage``)."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            pages = int(statm.read().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE") / 1e6
    except (OSError, ValueError, IndexError):
        import resource

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak / 1e6 if sys.platform == "darwin" else peak / 1e3


class Reporter:
    """Writes one JSON line per event to the supervisor (a pipe only this child writes to)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.running = ""

    def send(self, **message: Any) -> None:
        """Write one message; when the supervisor is gone, drop it (this child is stopping)."""
        data = (json.dumps(message, separators=(",", ":")) + "\n").encode()
        try:
            while data:
                data = data[os.write(self.fd, data) :]
        except OSError:  # EPIPE: the supervisor died; watch_supervisor stops this child
            pass

    def started(self, queue: Queue, task: Task, fn: Runnable, limit: float) -> None:
        """A run with a hard limit begins: what the supervisor needs to end it and retry it."""
        self.running = task.id
        self.send(
            run={
                "queue": queue.name,
                "id": task.id,
                "claim": task.claim,
                "attempts": task.attempts,
                "limit": limit,
                "since": time.monotonic(),
                "max_attempts": fn.max_attempts,
                "backoff": fn.retry_backoff,
                "backoff_max": fn.retry_backoff_max,
            }
        )

    def finished(self) -> None:
        if self.running:
            self.running = ""
            self.send(done=1)


class Recycler:
    """The worker's ``progress`` callback: reports progress and asks for a recycle.

    Checked between tasks, after the finished one was recorded: past the memory
    limit it bounds the worker at the tasks processed so far, so the worker gives
    its unstarted claims back, sends its acks and returns, and the child exits with
    :data:`EXIT_RECYCLE`.
    """

    def __init__(
        self,
        reporter: Reporter,
        max_memory: float | None,
        also: Callable[[Summary], None] | None,
    ) -> None:
        self.reporter = reporter
        self.max_memory = max_memory
        self.also = also
        self.worker: Worker | None = None
        self.reason = ""

    def __call__(self, summary: Summary) -> None:
        self.reporter.finished()
        if summary.processed == 1:
            self.reporter.send(ok=1)  # this child works: its slot's failure streak ends
        if self.also is not None:
            self.also(summary)
        if self.max_memory is None or self.worker is None or self.reason:
            return
        rss = rss_megabytes()
        if rss > self.max_memory:
            self.reason = f"its memory ({rss:.0f} MB) passed --max-memory-per-child"
            self.worker.max_tasks = summary.processed

    def finished_reason(self, summary: Summary) -> str:
        """Why the worker returned for a recycle ("" when it was not one)."""
        if self.reason:
            return self.reason
        limit = self.worker.max_tasks if self.worker is not None else None
        if limit is not None and summary.processed >= limit:
            return f"it ran {summary.processed} tasks (--max-tasks-per-child)"
        return ""


def become_child(close: Iterable[int]) -> None:
    """Make a freshly forked process a child of its own.

    Closes the supervisor's descriptors (other children's pipes, the wake-up pipe),
    drops the supervisor's signal wiring, and reseeds ``random`` (retry jitter must
    differ between children). Redis clients need nothing here: each backend keeps its
    client per process (:class:`~django_redislock.connections.ClientCache`), so the
    first call in the child opens its own sockets; the supervisor closed its database
    connections before forking.
    """
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    for fd in close:
        with contextlib.suppress(OSError):
            os.close(fd)
    random.seed()


def watch_supervisor(life: int) -> None:
    """Stop gracefully when the supervisor is gone (its end of the ``life`` pipe closes).

    Children run in their own process group (a Ctrl+C reaches only the supervisor),
    so without this a SIGKILLed supervisor would leave them running.
    """

    def wait() -> None:
        while os.read(life, 1):
            pass
        logger.warning("the pool supervisor is gone; this child stops")
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=wait, name="redislock-pool-parent", daemon=True).start()


def one_stop_per_burst() -> None:
    """Wrap the worker's SIGTERM/SIGINT handler: signals within SAME_STOP s count once."""
    handle = signal.getsignal(signal.SIGTERM)
    assert callable(handle)
    first: list[float] = []

    def on_signal(signum: int, frame: FrameType | None) -> None:
        now = time.monotonic()
        if first and now - first[0] < SAME_STOP:
            return
        first[:] = first or [now]
        handle(signum, frame)

    for signum in STOP_SIGNALS:
        signal.signal(signum, on_signal)


def connect_reporter(reporter: Reporter) -> Callable[..., None]:
    """Report the start of every run that has a hard time limit (``task_started``)."""

    def on_start(*, queue: Queue, task: Task, **kwargs: Any) -> None:
        fn = runnable(task)  # decoded and resolved already by the worker: cached, no I/O
        limit = hard_time_limit(fn, queue)
        if limit is not None:
            reporter.started(queue, task, fn, limit)

    signals.task_started.connect(on_start, weak=False, dispatch_uid="redislock-pool-child")
    return on_start


def run_child(
    make_worker: WorkerFactory,
    pipes: tuple[int, int],
    close: Iterable[int],
    *,
    max_memory: float | None = None,
    around: Callable[[], AbstractContextManager[Any]] | None = None,
    also: Callable[[Summary], None] | None = None,
) -> NoReturn:
    """The whole life of a child: set up, drain, report the summary, ``os._exit``.

    ``pipes`` are the write end of the report pipe and the read end of the life pipe;
    ``around`` wraps the drain (the first child runs the ``--scheduler`` in it).
    """
    code, worker, reporter = EXIT_ERROR, None, Reporter(pipes[0])
    try:
        become_child(close)
        watch_supervisor(pipes[1])
        recycler = Recycler(reporter, max_memory, also)
        worker = recycler.worker = make_worker(recycler)
        if limits_possible(worker.queues):
            connect_reporter(reporter)
        scheduling = around() if around is not None else contextlib.nullcontext()
        with scheduling, worker.signal_handlers():
            one_stop_per_burst()
            signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
            summary = worker.run()
        reason = recycler.finished_reason(summary)
        code = EXIT_RECYCLE if reason else EXIT_DONE
        reporter.send(recycle=reason)
    except ForcedStop:
        code = EXIT_FORCED
    except WorkerGaveUp as exc:
        logger.error("%s", exc)
        code = EXIT_GAVE_UP
    except BaseException:
        logger.exception("a pool child failed")
    finally:
        leave(reporter, worker, code)


def leave(reporter: Reporter, worker: Worker | None, code: int) -> NoReturn:
    """Send what the child did, flush its output and end the process (never return)."""
    try:
        if worker is not None:
            reporter.send(summary=worker.summary.as_dict())
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)
