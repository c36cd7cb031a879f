"""The supervisor of ``drain_queue --pool process``: N forked children, each a Worker.

The supervisor forks its children after Django setup and task autodiscovery, so
they share that memory copy-on-write, and then only watches them; it runs no task
and holds no thread. Each child runs :func:`.pool_child.run_child` in its own
process group (a terminal's Ctrl+C reaches only the supervisor, which decides what
the children get).

- **A child that dies** (SIGKILL, OOM kill, a task calling ``os._exit``) is
  replaced, after a delay that doubles from :data:`RESTART_FIRST` up to
  :data:`RESTART_MAX` while children keep dying without finishing a task (a
  crash-looping child cannot spin the CPU). Its running task is a "worker died"
  case of the queue: its lease expires, it comes back as a suspect and is charged
  from then on; the unstarted tasks of its batch come back without a charge. After
  :data:`FAILURE_LIMIT` deaths in a row with no task finished in between, the pool
  stops and exits non-zero.
- **Recycling**: a child that ran ``--max-tasks-per-child`` tasks or passed
  ``--max-memory-per-child`` (checked between tasks) finishes cleanly and is
  replaced at once.
- **Signals**: the first SIGTERM/SIGINT is relayed to every child (graceful: the
  running task finishes and is acked, unstarted claims are given back) and no child
  is replaced any more; a second is relayed too, at least :data:`FORCE_SPACING` after
  the first (each child raises ``ForcedStop``), and children still alive
  :data:`FORCE_GRACE` seconds later are SIGKILLed; a third SIGKILLs them at once. The
  supervisor returns when every child is gone. A child stopped by a signal of its own
  (not the pool's) is replaced at once.
- **Hard time limits**: a child reports each run that has a hard limit (task id,
  claim token, start on the shared monotonic clock, limit). One still running
  :data:`.pool_limits.KILL_GRACE` seconds past its limit is SIGKILLed; once it is reaped, the run
  is recorded as a failed attempt ("TimeLimitExceeded: killed after L s") through
  ``Queue.retry`` with the run's claim token, so a claim that is no longer current
  changes nothing, and the task is never run by two children at once (it becomes
  claimable only after the killed child is gone, provided the limit plus the grace
  fits in the run's lease).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import select
import signal
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from .pool_child import EXIT_DONE, EXIT_FORCED, EXIT_GAVE_UP, EXIT_RECYCLE, STOP_SIGNALS
from .pool_fork import ChildMain, fork_child, stop_signals_blocked
from .pool_limits import Run, charge_killed_run
from .queue import Queue
from .worker import Summary

logger = logging.getLogger("django_redislock.worker.pool")

#: Restart delay after the first death, and the cap of its doubling (seconds).
RESTART_FIRST = 0.5
RESTART_MAX = 30.0
#: Deaths in a row, with no task finished in between, after which the pool gives up.
FAILURE_LIMIT = 10
#: Seconds the children get after a second stop signal before they are SIGKILLed.
FORCE_GRACE = 5.0
#: The forcing relay follows the first one by at least this long: a child takes stop
#: signals closer together than ``pool_child.SAME_STOP`` for one stop (see there).
FORCE_SPACING = 0.6
#: The longest the supervisor sleeps between looks at its children.
TICK = 1.0


@dataclass
class Child:
    """One forked child as the supervisor sees it."""

    slot: int
    pid: int
    report: int  # read end of the child's report pipe
    life: int  # write end of its life pipe (closing it tells the child to stop)
    buffer: bytes = b""
    run: Run | None = None
    killed: Run | None = None
    recycle: str = ""
    summary: dict[str, Any] = field(default_factory=dict)


@dataclass
class Outcome:
    """What the pool did: the children's summaries added up, and how it ended."""

    summary: Summary
    forced: bool = False
    failure: str = ""

    @property
    def ok(self) -> bool:
        return not (self.forced or self.failure)


class Supervisor:
    """Forks ``concurrency`` children running ``child_main`` and keeps the pool running."""

    def __init__(
        self,
        child_main: ChildMain,
        queues: Mapping[str, Queue],
        concurrency: int,
        deadline: float | None = None,
        burst: bool = False,
    ) -> None:
        self.child_main = child_main
        self.queues = queues
        self.concurrency = concurrency
        self.deadline = deadline  # monotonic: no child is started after it
        self.children: dict[int, Child] = {}
        self.restarts: dict[int, float] = {}  # slot -> when to start its next child
        self.streak = 0  # children that died in a row without finishing a task
        self.stops = 0  # stop signals received
        self.burst = burst  # children end when nothing is due: one that ends is not replaced
        self.force_at: float | None = None
        self.relayed_at = 0.0  # when the first stop signal was relayed
        self.pending_force: tuple[float, int] | None = None  # (when, signal) of the forcing relay
        self.outcome = Outcome(Summary())
        self._signals: list[int] = []
        self._wake = (-1, -1)

    # -- the loop ---------------------------------------------------------------------------

    def run(self) -> Outcome:
        """Start the children and supervise them until every one is gone."""
        with self._wiring():
            try:
                for slot in range(self.concurrency):
                    self._start(slot)
                while self.children or self.restarts:
                    self._step()
            except BaseException:
                self._abandon()
                raise
        self.outcome.summary.elapsed = self.outcome.summary.elapsed_now()
        return self.outcome

    def _abandon(self) -> None:
        """The supervisor fails: close the life pipes, so every child stops gracefully."""
        for child in self.children.values():
            with contextlib.suppress(OSError):
                os.close(child.life)

    def _step(self) -> None:
        fds = [self._wake[0], *(child.report for child in self.children.values())]
        ready, _, _ = select.select(fds, [], [], self._timeout())
        if self._wake[0] in ready:
            with contextlib.suppress(OSError):
                os.read(self._wake[0], 512)
        for child in list(self.children.values()):
            if child.report in ready:
                self._read(child)
        while self._signals:
            self._on_stop_signal(self._signals.pop(0))
        self._reap()
        self._force_when_due()
        self._enforce_limits()
        self._start_due()

    def _timeout(self) -> float:
        now = time.monotonic()
        moments = [now + TICK, *self.restarts.values()]
        moments += [c.run.kill_at for c in self.children.values() if c.run and not c.killed]
        if self.force_at is not None:
            moments.append(self.force_at)
        if self.pending_force is not None:
            moments.append(self.pending_force[0])
        return max(min(moments) - now, 0.0)

    @contextlib.contextmanager
    def _wiring(self) -> Iterator[None]:
        """Signal handlers that only note the signal; a pipe that wakes the loop for them."""
        read, write = os.pipe()
        os.set_blocking(read, False)
        os.set_blocking(write, False)
        self._wake = (read, write)
        previous_fd = signal.set_wakeup_fd(write, warn_on_full_buffer=False)
        handlers = {sig: signal.signal(sig, self._note) for sig in STOP_SIGNALS}
        handlers[signal.SIGCHLD] = signal.signal(signal.SIGCHLD, self._wake_up)
        try:
            yield
        finally:
            signal.set_wakeup_fd(previous_fd)
            for sig, handler in handlers.items():
                signal.signal(sig, handler)
            os.close(read)
            os.close(write)

    def _note(self, signum: int, frame: Any) -> None:
        """A stop signal: handled by the loop (the wake-up pipe ends its select at once)."""
        self._signals.append(signum)

    def _wake_up(self, signum: int, frame: Any) -> None:
        """SIGCHLD: nothing to do here; the wake-up pipe makes the loop reap at once."""

    # -- children ------------------------------------------------------------------------------

    def _start(self, slot: int) -> None:
        """Fork the child of ``slot`` and record it (see :func:`.pool_fork.fork_child`)."""
        inherited = [*self._wake]
        inherited += [fd for child in self.children.values() for fd in (child.report, child.life)]
        with stop_signals_blocked():
            pid, report, life = fork_child(self.child_main, slot, inherited)
            self.children[pid] = Child(slot, pid, report, life)
        logger.info("pool child %d started (pid %d)", slot, pid)

    def _start_due(self) -> None:
        now = time.monotonic()
        for slot, when in list(self.restarts.items()):
            if when <= now:
                del self.restarts[slot]
                if self.deadline is None or now < self.deadline:
                    self._start(slot)

    def _read(self, child: Child) -> None:
        """Take what ``child`` wrote to its report pipe (JSON lines)."""
        with contextlib.suppress(BlockingIOError):
            while data := os.read(child.report, 65536):
                child.buffer += data
        *lines, child.buffer = child.buffer.split(b"\n")
        for line in lines:
            try:
                self._message(child, json.loads(line))
            except (ValueError, TypeError) as exc:  # never from run_child; say so and go on
                logger.error(
                    "pool child %d sent an unreadable report %r: %s", child.slot, line, exc
                )

    def _message(self, child: Child, message: dict[str, Any]) -> None:
        if "run" in message:
            child.run = Run(**message["run"])
        if "done" in message:
            child.run = None
        if "ok" in message:
            self.streak = 0
        if message.get("recycle"):
            child.recycle = message["recycle"]
        if "summary" in message:
            child.summary = message["summary"]

    def _reap(self) -> None:
        for child in list(self.children.values()):
            try:
                pid, status = os.waitpid(child.pid, os.WNOHANG)
            except ChildProcessError:  # reaped elsewhere: its status is unknown
                pid, status = child.pid, 255 << 8
            if pid:
                self._read(child)
                del self.children[child.pid]
                os.close(child.report)
                os.close(child.life)
                self._add_summary(child.summary)
                self._exited(child, status)

    def _exited(self, child: Child, status: int) -> None:
        """Decide what follows a child's exit: nothing, a replacement, or the end of the pool."""
        code = os.waitstatus_to_exitcode(status)
        stopping = self.stops > 0 or bool(self.outcome.failure)
        if child.killed is not None:
            self._charge(child.killed)
            if not stopping:
                self.restarts[child.slot] = time.monotonic()
        elif code == EXIT_RECYCLE:
            logger.info("pool child %d (pid %d) recycled: %s", child.slot, child.pid, child.recycle)
            if not stopping:
                self.restarts[child.slot] = time.monotonic()
        elif code == EXIT_GAVE_UP:
            self._give_up("Redis stayed unreachable past the workers' give-up time")
        elif stopping:
            self.outcome.forced |= code == EXIT_FORCED  # its running task was interrupted
        elif code in (EXIT_DONE, EXIT_FORCED):
            self._ended(child, code)
        else:
            self._died(child, code)

    def _ended(self, child: Child, code: int) -> None:
        """A child returned while the pool goes on: its bound ended, or it got a signal."""
        bounded = self.burst or (self.deadline is not None and time.monotonic() >= self.deadline)
        if code == EXIT_DONE and bounded:
            return  # --burst found nothing due, or --timeout ended: the pool winds down
        logger.warning(
            "pool child %d (pid %d) was stopped by a signal of its own; replacing it",
            child.slot,
            child.pid,
        )
        self.restarts[child.slot] = time.monotonic()

    def _died(self, child: Child, code: int) -> None:
        how = f"was killed by {signal.Signals(-code).name}" if code < 0 else f"exited with {code}"
        self.streak += 1
        if self.streak >= FAILURE_LIMIT:
            self._give_up(f"{self.streak} children died in a row without finishing a task")
            return
        delay = min(RESTART_FIRST * 2 ** (self.streak - 1), RESTART_MAX)
        logger.warning(
            "pool child %d (pid %d) %s; its running task comes back when its lease ends; "
            "replacing it in %.1fs",
            child.slot,
            child.pid,
            how,
            delay,
        )
        self.restarts[child.slot] = time.monotonic() + delay

    def _give_up(self, why: str) -> None:
        if not self.outcome.failure:
            logger.error("the process pool stops: %s", why)
            self.outcome.failure = why
            self.restarts.clear()
            self._relay(signal.SIGTERM)

    def _add_summary(self, done: Mapping[str, Any]) -> None:
        total = self.outcome.summary
        for name in ("processed", "succeeded", "failed", "retried", "dead", "released"):
            setattr(total, name, getattr(total, name) + int(done.get(name, 0)))

    # -- signals -------------------------------------------------------------------------------

    def _on_stop_signal(self, signum: int) -> None:
        self.stops += 1
        self.restarts.clear()
        name = signal.Signals(signum).name
        if self.stops == 1:
            logger.warning("%s: the children finish their running tasks and stop", name)
            self._relay(signum)
            self.relayed_at = time.monotonic()
        elif self.stops == 2:
            logger.warning("second %s: the children stop at once", name)
            self.outcome.forced = True
            self.pending_force = (self.relayed_at + FORCE_SPACING, signum)
        else:
            self._kill_all()

    def _force_when_due(self) -> None:
        """Send the forcing relay once it is far enough from the first (see FORCE_SPACING)."""
        if self.pending_force is not None and time.monotonic() >= self.pending_force[0]:
            self._relay(self.pending_force[1])
            self.pending_force = None
            self.force_at = time.monotonic() + FORCE_GRACE

    def _relay(self, signum: int) -> None:
        for child in self.children.values():
            with contextlib.suppress(ProcessLookupError):
                os.kill(child.pid, signum)

    def _kill_all(self) -> None:
        self.force_at = self.pending_force = None
        for child in self.children.values():
            with contextlib.suppress(ProcessLookupError):
                os.kill(child.pid, signal.SIGKILL)

    # -- hard time limits ------------------------------------------------------------------------

    def _enforce_limits(self) -> None:
        now = time.monotonic()
        if self.force_at is not None and now >= self.force_at:
            logger.error("children still running %gs after a forced stop: killed", FORCE_GRACE)
            self._kill_all()
        for child in self.children.values():
            if child.run is not None and child.killed is None and now >= child.run.kill_at:
                self._read(child)  # a "done" already written means that run is over
            run = child.run
            if run is not None and child.killed is None and now >= run.kill_at:
                logger.error(
                    "task %s of %r ran past its time limit of %gs: killing pool child %d (pid %d)",
                    run.id,
                    run.queue,
                    run.limit,
                    child.slot,
                    child.pid,
                )
                child.killed = run
                with contextlib.suppress(ProcessLookupError):
                    os.kill(child.pid, signal.SIGKILL)

    def _charge(self, run: Run) -> None:
        """Record a killed run as a failed attempt (the child is gone now)."""
        outcome = charge_killed_run(self.queues[run.queue], run)
        if outcome is not None:
            total = self.outcome.summary
            total.processed += 1
            total.failed += 1
            total.retried += outcome == "retried"
            total.dead += outcome == "dead"
