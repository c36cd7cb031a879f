"""A worker's place in the workers registry: its heartbeat thread and its current tasks.

:func:`register` is called by :meth:`Worker.run <.worker.Worker.run>` when it
starts; :meth:`Registration.stop` in its ``finally``. In between, a daemon thread
sends one ``workers_beat`` script every ``WORKER_HEARTBEAT`` seconds (the first at
once) with the worker's record: host, pid, queues, pool and concurrency, uptime,
processed and failed counts (from the worker's :class:`~.worker.Summary`), and the
tasks it is running, each with how long it has been running, and the pool's health
(:meth:`Worker.health <.worker.Worker.health>`: ``"ok"`` or ``"wedged"`` with why, plus
``stalled``, the seconds since a run last ended while some run): a worker whose pool
threads died, whose event loop stopped answering or whose run is stuck past its hard
limit keeps beating, but is listed as wedged, never as healthy.

Current tasks cost no round trip: the worker keeps a table of the tasks it is running
(:meth:`Worker.running <.worker.Worker.running>`, written as each run starts and ends, in
whichever thread or coroutine runs it), and each heartbeat writes what the table holds, so the
registry shows a task at most ``WORKER_HEARTBEAT`` seconds late (and a finished one at most
that long after it ended). Nothing listens to the task signals: a worker's record is built
from that worker's own table only.

An operator's command (:func:`~.workers.send_command`: quiet, resume, stop, from the
dashboard's Workers page) waits in the registry's control hash and is taken by the
next heartbeat in the same script, so the worker acts within one ``WORKER_HEARTBEAT``:
"quiet" makes it claim nothing more (its claims still ack and recover leases, and its
idle waits sleep instead of taking the queues' wake-up signals), "resume" undoes that,
"stop" is a graceful stop (as SIGTERM).

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
from typing import Any

from . import workers

logger = logging.getLogger("django_redislock.worker.registry")

#: Longest wait for the heartbeat thread to finish a beat when the worker stops.
JOIN_SECONDS = 2.0


class Registration:
    """One worker's record in the registry, kept alive by a daemon thread."""

    def __init__(self, worker: Any) -> None:
        self.worker = worker
        self.backend = worker.backend
        self.id = secrets.token_hex(8)
        self.interval = float(self.backend.options["WORKER_HEARTBEAT"])
        self.ttl = float(self.backend.options["WORKER_HEARTBEAT_TTL"])
        self.host = socket.gethostname()
        self.started = time.monotonic()
        self._lock = threading.Lock()  # a beat in flight finishes before leave() is sent
        self._stop = threading.Event()
        self._failing = False
        self._left = False
        #: the processed count at the last beat, and since when it has not moved
        self._seen = (-1, self.started)
        self._thread = threading.Thread(
            target=self._run, name=f"redislock-heartbeat-{self.id}", daemon=True
        )

    # -- the record ------------------------------------------------------------------------

    def record(self) -> dict[str, Any]:
        """What the next heartbeat stores (ages in seconds, measured on the monotonic clock)."""
        now = time.monotonic()
        running = self.worker.running()
        summary = self.worker.summary
        if summary.processed != self._seen[0]:
            self._seen = (summary.processed, now)
        health = getattr(self.worker, "health", None)
        ok, why = health() if health is not None else (True, "")
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
                {"id": task_id, "queue": queue, "age": round(max(now - since, 0), 6)}
                for queue, task_id, since in running[: workers.MAX_CURRENT]
            ],
            "more_tasks": max(0, len(running) - workers.MAX_CURRENT),
            # the pool's health: "ok" or "wedged" (why), and seconds since a run last ended
            # while some run (0 when none runs: an idle worker is not stuck)
            "health": "ok" if ok else "wedged",
            "wedged": why,
            "stalled": round(now - self._seen[1], 3) if running else 0,
            "quiet": bool(getattr(self.worker, "quiet", False)),
        }

    # -- the thread ------------------------------------------------------------------------

    def start(self) -> None:
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
                _, command = workers.beat_and_take(self.backend, self.id, self.ttl, self.record())
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
        if command:
            self.obey(command)
        return True

    def obey(self, command: str) -> None:
        """Act on an operator's command taken with a heartbeat (quiet, resume, stop)."""
        logger.warning("worker %s: %s, as an operator asked", self.id, command)
        if command == "quiet":
            self.worker.quiet = True  # claims nothing more; running tasks finish
        elif command == "resume":
            self.worker.quiet = False
        elif command == "stop":
            self.worker.stop()  # as SIGTERM: running tasks finish, unstarted ones go back

    def stop(self) -> None:
        """Stop beating and leave the registry at once (or let the record expire)."""
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
