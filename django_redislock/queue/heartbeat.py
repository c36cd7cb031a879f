"""A worker's place in the workers registry: its heartbeat thread and its current tasks.

:func:`register` is called by :meth:`Worker.run <.worker.Worker.run>` when it
starts; :meth:`Registration.stop` in its ``finally``. In between, a daemon thread
sends one ``workers_beat`` script every ``WORKER_HEARTBEAT`` seconds (the first at
once) with the worker's record: host, pid, queues, pool and concurrency, uptime,
processed and failed counts (from the worker's :class:`~.worker.Summary`), and the
tasks it is running, each with how long it has been running.

Current tasks cost no round trip: receivers of the ``task_started`` signal and of
the three end signals keep them in memory, and the next heartbeat writes them, so
the registry shows a task at most ``WORKER_HEARTBEAT`` seconds late (and a finished
one at most that long after it ended). A signal counts for a registration when its
queue is one of the worker's queues and it comes from the thread running the
worker's loop, or from another thread (a pool's) that runs no other worker's loop.

Failures: a heartbeat that Redis does not answer is logged once (WARNING) and
tried again at the next interval; it never stops the worker, and the worker's
record simply expires if the outage outlasts ``WORKER_HEARTBEAT_TTL``, to come back
with the next heartbeat that gets through. A heartbeat resent by redis-py stores
the same record twice. A clean stop joins the thread (so no heartbeat lands after
it) and removes the record at once; if Redis is unreachable then, the record
expires after its TTL. A worker killed with SIGKILL leaves its record to expire.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import threading
import time
from dataclasses import dataclass
from typing import Any

from .. import signals
from . import workers
from .queue import Queue
from .records import Task

logger = logging.getLogger("django_redislock.worker.registry")

#: Longest wait for the heartbeat thread to finish a beat when the worker stops.
JOIN_SECONDS = 2.0


@dataclass
class Running:
    """A task this worker is running: its queue, id, and when it started (monotonic)."""

    queue: str
    id: str
    since: float


class Registration:
    """One worker's record in the registry, kept alive by a daemon thread."""

    def __init__(self, worker: Any) -> None:
        self.worker = worker
        self.backend = worker.backend
        self.id = secrets.token_hex(8)
        self.interval = float(self.backend.options["WORKER_HEARTBEAT"])
        self.ttl = float(self.backend.options["WORKER_HEARTBEAT_TTL"])
        self.queues = {id(queue): queue.name for queue in worker.queues}
        self.host = socket.gethostname()
        self.started = time.monotonic()
        self.loop_thread = threading.get_ident()
        self.running: dict[tuple[str, str], Running] = {}
        self._lock = threading.Lock()  # a beat in flight finishes before leave() is sent
        self._stop = threading.Event()
        self._failing = False
        self._left = False
        self._thread = threading.Thread(
            target=self._run, name=f"redislock-heartbeat-{self.id}", daemon=True
        )

    # -- the record ------------------------------------------------------------------------

    def record(self) -> dict[str, Any]:
        """What the next heartbeat stores (ages in seconds, measured on the monotonic clock)."""
        now = time.monotonic()
        running = sorted(list(self.running.values()), key=lambda r: r.since)
        summary = self.worker.summary
        return {
            "alias": self.backend.alias,
            "host": self.host,
            "pid": os.getpid(),
            "queues": [queue.name for queue in self.worker.queues],
            "pool": str(getattr(self.worker, "pool", "solo")),
            "concurrency": int(getattr(self.worker, "concurrency", 1)),
            "up": round(now - self.started, 6),
            "processed": summary.processed,
            "failed": summary.failed,
            "tasks": [
                {"id": r.id, "queue": r.queue, "age": round(now - r.since, 6)}
                for r in running[: workers.MAX_CURRENT]
            ],
            "more_tasks": max(0, len(running) - workers.MAX_CURRENT),
        }

    # On the hot path of every task: no lock. A dict's item assignment and pop, and the
    # heartbeat thread's ``list(running.values())``, are each one step under the GIL.

    def task_started(self, queue: Queue, task: Task) -> None:
        self.running[queue.name, task.id] = Running(queue.name, task.id, time.monotonic())

    def task_ended(self, queue: Queue, task: Task) -> None:
        self.running.pop((queue.name, task.id), None)

    # -- the thread ------------------------------------------------------------------------

    def start(self) -> None:
        _active.add(self)
        self._thread.start()

    def _run(self) -> None:
        while True:
            self.beat()
            if self._stop.wait(self.interval):
                return

    def beat(self) -> bool:
        """Send one heartbeat; False (logged once per outage) when Redis did not take it."""
        with self._lock:  # held while sending: leave() waits for a beat on its way
            if self._left:
                return False
            try:
                workers.beat(self.backend, self.id, self.ttl, self.record())
            except Exception as exc:  # an outage, a bad key: the worker goes on regardless
                if not self._failing:
                    logger.warning(
                        "worker %s: heartbeat failed, retrying every %gs (%s)",
                        self.id,
                        self.interval,
                        exc,
                    )
                self._failing = True
                return False
        if self._failing:
            logger.warning("worker %s: heartbeat sent again", self.id)
        self._failing = False
        return True

    def stop(self) -> None:
        """Stop beating and leave the registry at once (or let the record expire)."""
        _active.discard(self)
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(JOIN_SECONDS)
        with self._lock:
            self._left = True
        try:
            workers.leave(self.backend, self.id)
        except Exception as exc:
            logger.warning(
                "worker %s: could not leave the registry (%s); its record expires in %gs",
                self.id,
                exc,
                self.ttl,
            )


def register(worker: Any) -> Registration:
    """Put ``worker`` in its alias's registry and keep it there until ``stop()``."""
    registration = Registration(worker)
    registration.start()
    return registration


# -- routing the task signals to registrations ---------------------------------------------


class Active:
    """The registrations of this process, and which loop thread each runs in."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        #: replaced, never changed in place, so the hot path reads it without the lock
        self._all: tuple[Registration, ...] = ()

    def add(self, registration: Registration) -> None:
        with self._lock:
            if not self._all:
                listen(True)
            self._all = (*self._all, registration)

    def discard(self, registration: Registration) -> None:
        with self._lock:
            if registration in self._all:
                self._all = tuple(r for r in self._all if r is not registration)
                if not self._all:
                    listen(False)

    def forget(self) -> None:
        """In a forked child: the parent's registrations are not this process's workers.

        Their heartbeat threads did not survive the fork; a child that runs a worker
        (a process pool's) registers that worker itself.
        """
        self._lock = threading.Lock()
        if self._all:
            self._all = ()
            listen(False)

    def for_signal(self, queue: Any) -> list[Registration]:
        """The registrations a task signal of ``queue`` from this thread belongs to."""
        found = [r for r in self._all if id(queue) in r.queues]
        if len(found) <= 1:
            return found
        here = threading.get_ident()
        mine = [r for r in found if r.loop_thread == here]
        if mine:
            return mine
        loops = {r.loop_thread for r in self._all}
        return [] if here in loops else found


_active = Active()
os.register_at_fork(after_in_child=_active.forget)


def on_started(sender: Any, queue: Any = None, task: Any = None, **kwargs: Any) -> None:
    for registration in _active.for_signal(queue):
        registration.task_started(queue, task)


def on_ended(sender: Any, queue: Any = None, task: Any = None, **kwargs: Any) -> None:
    for registration in _active.for_signal(queue):
        registration.task_ended(queue, task)


def listen(on: bool) -> None:
    """Receive the task signals only while a worker of this process is registered.

    A process with no worker (a web server that sends no task signal anyway, or a
    test) then pays nothing, and a worker pays about a microsecond per task and
    signal (the signals cache their receivers).
    """
    pairs = [(signals.task_started, on_started)] + [
        (signal, on_ended)
        for signal in (signals.task_succeeded, signals.task_failed, signals.task_dead)
    ]
    for signal, receiver in pairs:
        uid = f"redislock-registry-{id(signal)}"
        if on:
            signal.connect(receiver, dispatch_uid=uid)
        else:
            signal.disconnect(dispatch_uid=uid)
