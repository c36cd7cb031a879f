"""The scheduler: enqueues each tick of every schedule exactly once, however many run.

Correctness does not depend on how many schedulers run or when they die: each tick is
queued by one script (``periodic_enqueue.lua``) that moves the schedule's mark (the last
enqueued tick, in a hash under the queue's hash tag) and queues the tick's deterministic
task id in the same atomic step. A second scheduler, a resend after a timeout, or a restart
after a crash finds the mark and changes nothing.

The lock is for efficiency only: one scheduler (the leader) holds ``periodic:<alias>`` from
the locks handler and does the work; the others wait on the lock (push wake-up, no polling)
and take over within milliseconds of a release or within the lock's ttl of a crash. Two
leaders at once (a paused leader whose lock expired) still enqueue every tick once.

The clock is Redis ``TIME`` of the queue alias (one clock for every scheduler on every host,
so a host with a wrong clock can neither fire early nor late); the waits between ticks are
measured on the local monotonic clock, so the difference between the two never matters.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from ..calls.values import Arg
from ..conf import DEFAULT_ALIAS
from ..exceptions import (
    ConfigurationError,
    ConnectionFailed,
    InvalidArgument,
    LockError,
    QueueError,
    RedisLockError,
)
from ..handlers import locks, queues
from ..queue.queue import Queue
from ..queue.registry import TaskFunction, resolve
from ..queue.results import with_result_marker
from ..queue.sending import run_call
from ..validation import check_seconds
from .registry import all_schedules, needs_croniter
from .schedules import SECOND, Schedule, tick_label

#: A child of the worker's logger, so ``drain_queue``'s ``-v`` shows the scheduler's lines too.
logger = logging.getLogger("django_redislock.worker.scheduler")

#: Seconds the leader's lock lives without renewal: how long a crashed leader's ticks wait.
LEADER_TTL = 10.0
#: Seconds before a schedule whose round failed is tried again.
RETRY_FAILED = 5.0
#: Seconds before a scheduler thread that died of an unexpected error is started again.
RESTART_DELAY = 1.0
#: The script's replies.
QUEUED, ALREADY, KEPT = 1, 0, 2


def redis_clock(using: str = DEFAULT_ALIAS) -> Callable[[], int]:
    """A clock reading Redis ``TIME`` of the queue alias ``using``, in microseconds."""

    def now() -> int:
        backend = queues[using]
        with backend.errors():  # type: ignore[attr-defined]
            seconds, micros = backend.client.time()  # type: ignore[attr-defined]
        return int(seconds) * SECOND + int(micros)

    return now


@dataclass
class Entry:
    """A schedule with the task it queues and the queue it goes to."""

    schedule: Schedule
    task: TaskFunction[Any, Any]
    queue: Queue
    data: bytes

    @property
    def state_key(self) -> str:
        """The queue's schedule hash: schedule name -> last enqueued tick (µs)."""
        return self.queue.backend.key(f"q:{self.queue.name}", "periodic")


@dataclass
class Stats:
    """What a scheduler did: ticks queued, found already queued, and skipped as missed."""

    queued: int = 0
    already: int = 0
    skipped: int = 0
    rounds: int = 0
    #: rounds of one schedule that failed (logged; the others went on)
    failed: int = 0


def build_entry(item: Schedule, using: str) -> Entry:
    """Resolve a schedule's task (only among the task modules) and encode its payload once.

    A task that is not registered, or arguments it cannot take, raise
    :class:`~django_redislock.exceptions.ConfigurationError` naming the schedule: a scheduler
    must not start and queue calls that every worker would fail.
    """
    try:
        fn = resolve(item.task)
        queue = queues[using].queue(item.queue or fn.queue_name)
        data = queue.encode(with_result_marker(fn, queue, fn.payload(item.args, item.kwargs)))
    except (QueueError, InvalidArgument, TypeError) as exc:
        message = str(exc).replace("; nothing was queued", "")
        raise ConfigurationError(f"periodic task {item.name!r}: {message}") from exc
    return Entry(item, fn, queue, data)


class Scheduler:
    """Run schedules: ``Scheduler().run()`` until :meth:`stop`, or :meth:`tick` for one round.

    ``schedules`` defaults to every ``@periodic_task`` and ``REDISLOCK_PERIODIC_TASKS`` entry;
    ``using`` is the queue alias and ``lock_using`` the lock alias of the leader lock;
    ``clock`` returns microseconds since the epoch (default: Redis ``TIME``), and tests pass
    their own to simulate downtime without sleeping.
    """

    def __init__(
        self,
        schedules: Iterable[Schedule] | None = None,
        *,
        using: str = DEFAULT_ALIAS,
        lock_using: str = DEFAULT_ALIAS,
        clock: Callable[[], int] | None = None,
        leader_ttl: float = LEADER_TTL,
    ) -> None:
        found = list(all_schedules().values() if schedules is None else schedules)
        needs_croniter({item.name: item for item in found})
        self.using = using
        self.entries = [build_entry(item, using) for item in found]
        self.clock = clock or redis_clock(using)
        self.leader_ttl = check_seconds(leader_ttl, "leader_ttl", allow_zero=False)
        self.lock = locks[lock_using].lock(
            f"periodic:{using}", ttl=leader_ttl, watchdog=False, blocking=True
        )
        self.stats = Stats()
        self._stop = threading.Event()
        #: schedules whose mark is ahead of the Redis clock (warned once each)
        self._behind: set[str] = set()
        #: when the lock server stopped answering (monotonic), while it does not
        self._unreachable_since: float | None = None

    def stop(self) -> None:
        """Ask :meth:`run` to return (within one wait); the lock is released for a standby."""
        self._stop.set()

    # -- one round ------------------------------------------------------------------------

    def tick(self) -> int:
        """Enqueue every due tick of every schedule now; returns the next tick (µs).

        Safe to call from any number of processes at once: the script decides.

        One schedule's error (a bad expression that slipped past validation, a queue that
        refuses the tick) is logged with its traceback and costs only that schedule's round:
        the others are queued, and it is tried again next round. Redis being unreachable is
        raised, as every schedule meets it.
        """
        now = self.clock()
        self.stats.rounds += 1
        upcoming: list[int] = []
        for entry in self.entries:
            try:
                self.run_entry(entry, now)
                upcoming.append(entry.schedule.next_tick(now))
            except ConnectionFailed:
                raise
            except Exception as exc:
                self.stats.failed += 1
                logger.error(
                    "periodic %s: this round failed (%s); the other schedules go on and it is "
                    "tried again next round",
                    entry.schedule.name,
                    exc,
                    exc_info=exc,
                )
                upcoming.append(now + round(RETRY_FAILED * SECOND))
        return min(upcoming, default=now + 60 * SECOND)

    def run_entry(self, entry: Entry, now: int) -> None:
        """Enqueue the due ticks of one schedule, as its catch-up policy says.

        A Redis clock behind the schedule's mark (a failover to a server whose clock is
        late, a clock set back) queues nothing until it passes the mark again: the ticks
        up to the mark were queued already, and none is queued twice. A warning says so
        (once per schedule until the clock catches up).
        """
        backend = entry.queue.backend
        with backend.errors():
            raw = backend.client.hget(entry.state_key, entry.schedule.name)
        last = None if raw is None else int(raw)
        name = entry.schedule.name
        if last is not None and now < last:
            if name not in self._behind:
                self._behind.add(name)
                logger.warning(
                    "periodic %s: the Redis clock (%s) is %.1f s behind the last queued tick "
                    "(%s); nothing is queued until it passes that tick again",
                    name,
                    tick_label(now),
                    (last - now) / SECOND,
                    tick_label(last),
                )
            return
        self._behind.discard(name)
        ticks, skipped = entry.schedule.due(last, now)
        if skipped:
            self.stats.skipped += skipped
            logger.warning(
                "periodic %s: skipped %d missed tick(s) (catch_up=%r)",
                entry.schedule.name,
                skipped,
                entry.schedule.catch_up,
            )
        for tick in ticks:
            self.send(entry, tick, now)

    def send(self, entry: Entry, tick: int, now: int) -> int:
        """Queue one tick through the script; the reply (QUEUED, ALREADY or KEPT)."""
        queue, name = entry.queue, entry.schedule.name
        queue.backend.register_queue(queue.name)
        keys = [*queue.script_keys, entry.state_key, queue.rates_key]
        args: list[Arg] = [
            name,
            tick,
            entry.schedule.task_id(tick),
            entry.data,
            entry.task.priority,
        ]
        reply = int(run_call(queue.backend, ("periodic_enqueue", keys, args)))
        if reply == ALREADY:
            self.stats.already += 1
            return reply
        self.stats.queued += 1
        late = (now - tick) / 1000
        logger.info(
            "periodic %s: %.1f ms late, queued the tick of %s", name, late, tick_label(tick)
        )
        return reply

    # -- the loop -------------------------------------------------------------------------

    def run(self, timeout: float | None = None) -> Stats:
        """Lead or stand by until :meth:`stop` (or ``timeout`` seconds); returns the stats."""
        deadline = None if timeout is None else time.monotonic() + timeout
        if not self.entries:
            logger.warning("no periodic tasks are defined; the scheduler has nothing to do")
        try:
            while not self._stop.is_set() and not _past(deadline):
                if self._lead():
                    logger.info("periodic: leading (pid %d)", os.getpid())
                    self._serve(deadline)
        finally:
            self._resign()
        return self.stats

    def _lead(self) -> bool:
        """Wait (bounded) for the leader lock; True once this scheduler holds it."""
        try:
            held = bool(self.lock.acquire(timeout=min(1.0, self.leader_ttl)))
        except RedisLockError as exc:
            # once per outage, as a worker logs one: a try a second would log a line a second
            if self._unreachable_since is None:
                self._unreachable_since = time.monotonic()
                logger.warning(
                    "periodic: cannot reach the lock server (%s); retrying every second", exc
                )
            self._stop.wait(1.0)
            return False
        if self._unreachable_since is not None:
            gone = time.monotonic() - self._unreachable_since
            logger.warning("periodic: the lock server answers again after %.1fs", gone)
            self._unreachable_since = None
        return held

    def _serve(self, deadline: float | None) -> None:
        """Lead: run rounds and sleep until the next tick, renewing the lock, until lost."""
        while not self._stop.is_set() and not _past(deadline):
            try:
                self.lock.extend()
                wait = self.wait_for(self.tick())
            except LockError as exc:
                logger.warning("periodic: lost the leader lock (%s); standing by", exc)
                return
            except RedisLockError as exc:
                logger.warning("periodic: a round failed (%s); retrying in 1 s", exc)
                wait = 1.0
            except Exception as exc:  # a bug, not an outage: logged, and the scheduler lives on
                logger.error("periodic: a round failed (%s); retrying in 1 s", exc, exc_info=exc)
                wait = 1.0
            self._sleep(wait, deadline)

    def wait_for(self, next_tick: int) -> float:
        """Seconds from now (Redis clock) to ``next_tick``."""
        return max(0.0, (next_tick - self.clock()) / SECOND)

    def _sleep(self, wait: float, deadline: float | None) -> None:
        """Sleep ``wait`` seconds but at most a third of the lock's ttl, or until stopped."""
        wait = min(wait, self.leader_ttl / 3)
        if deadline is not None:
            wait = min(wait, max(0.0, deadline - time.monotonic()))
        self._stop.wait(wait)

    def _resign(self) -> None:
        """Release the leader lock if held, so a standby takes over at once."""
        try:
            if self.lock.owned():
                self.lock.release()
        except RedisLockError as exc:
            logger.warning("periodic: could not release the leader lock (%s)", exc)

    # -- a thread for drain_queue -------------------------------------------------------

    def start_thread(self) -> threading.Thread:
        """Run in a daemon thread (``drain_queue --scheduler``); stop it with :meth:`stop`.

        The thread is supervised: should :meth:`run` end on an error it did not handle, it is
        logged with its traceback and the scheduler starts again after
        :data:`RESTART_DELAY` s, so a worker never runs on without its scheduler.
        """
        thread = threading.Thread(target=self.run_supervised, name="redislock-scheduler")
        thread.daemon = True
        thread.start()
        return thread

    def run_supervised(self) -> None:
        """:meth:`run` until :meth:`stop`, started again after any error that ends it."""
        while not self._stop.is_set():
            try:
                self.run()
            except Exception as exc:
                logger.error(
                    "periodic: the scheduler stopped on an error (%s); starting it again in %g s",
                    exc,
                    RESTART_DELAY,
                    exc_info=exc,
                )
                self._stop.wait(RESTART_DELAY)


def _past(deadline: float | None) -> bool:
    return deadline is not None and time.monotonic() >= deadline
