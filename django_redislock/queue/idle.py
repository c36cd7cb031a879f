"""How a worker waits when no queue has work: a blocking wait that carries its next claim.

The idle half of :class:`~django_redislock.queue.worker.Worker`: it blocks (never
busy-polls) until a task is enqueued, the next delayed task or lease deadline comes due,
or a stop signal cuts the wait short. See docs/calls.md ("Blocking waits") for the wait
itself and its deadline.

Pickup in one round trip: the wait's ``BLPOP`` and the claim of a queue go out together
(:func:`~django_redislock.calls.wait.wait_then`); Redis runs the claim as soon as the
``BLPOP`` returns, and its reply carries the claimed tasks, which the next round takes
(``_ready``) instead of claiming again. The claim has a request key, so not knowing
whether it ran (its reply lost, the deadline passed, a stop signal) is settled the usual
way: the call is kept as unanswered and the next claim of that queue is that same call
again, which answers what it took. A worker that stops with such a call, or with a
taken claim it did not start, gives those tasks back at once (:meth:`_give_back_pickups`).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from typing import Any

from ..calls.script import script
from ..calls.wait import wait_on, wait_then
from .queue import Queue
from .records import Call, Claim, Task
from .runs import Runs
from .stops import OUTAGES, Interrupted

logger = logging.getLogger("django_redislock.worker")

#: Longest idle BLPOP; the socket timeout (OPTIONS['SOCKET_TIMEOUT']) must stay above it.
MAX_IDLE_WAIT = 5.0
#: How late Redis may end a BLPOP's timeout: it checks them on its clock tick (1/hz, 0.1 s
#: at the default hz 10). A wait for the moment a task comes due (or a rate limit admits
#: one) blocks until this long before it, then sleeps the rest here, so that moment is not
#: missed by up to a tick; other waits (the idle cap) block to their end.
BLOCK_SLACK = 0.1


class IdleWait(Runs):
    """A worker's waiting: :meth:`_wait` between rounds, :meth:`_sleep` in an outage."""

    queues: list[Queue]
    backend: Any
    batch: int
    max_tasks: int | None
    lease: float | None
    timeout: float | None
    _hints: dict[str, Claim]
    _stopping: bool
    quiet: bool
    _waiting: bool
    _timed_wait: bool
    _unanswered: dict[str, Call[Claim]]
    #: per queue, the claim an idle wait brought back: the next claim of the queue is this
    _ready: dict[str, Claim]
    #: per queue, the idle wait's claim kept unanswered (given back if the worker stops)
    _picked: dict[str, Call[Claim]]

    def _next_claim(self, queue: Queue, count: int, acks: list[Task] | None = None) -> Call[Claim]:
        """A new claim of ``queue`` (not charging attempts) that frees the previous claim's
        request key."""
        previous = self._hints.get(queue.name)
        done = previous.request if previous is not None and previous.request else None
        return queue._claim_call(count, self.lease, acks or [], False, done)

    def _elapsed(self) -> float:
        return time.monotonic() - self.summary.started

    def _sleep(self, seconds: float) -> None:
        """Sleep, cut short by a stop signal."""
        self._waiting = True
        try:
            if not self._stopping and seconds > 0:
                time.sleep(seconds)
        except Interrupted:
            pass
        finally:
            self._waiting = False

    def _wait(self) -> None:
        """Block until a task is enqueued or something becomes due (never busy-polls)."""
        if self._executor is not None:
            self._executor.wait()
            return
        self._idle(self._wait_seconds())

    def _idle(self, seconds: float) -> None:
        """BLPOP on the queues' signal lists for up to ``seconds`` (a stop signal cuts it),
        with the claim of the first queue waited on sent behind it (see :meth:`_pickup`)."""
        self._flush_acks(force=True)
        if self.quiet:  # told to claim nothing: sleep, leave the wake-ups to the others
            self._sleep(min(seconds, 1.0))
            return
        queues = self.queues
        if self.backend.is_cluster and len(queues) > 1:
            # a BLPOP on a Cluster takes keys of one slot; wait on the queues in turn
            queues = [queues[int(time.monotonic()) % len(queues)]]
            seconds = min(seconds, 1.0)
        keys = [queue.signal_key for queue in queues]
        slack = BLOCK_SLACK if self._timed_wait else 0.0  # see BLOCK_SLACK
        end = time.monotonic() + seconds
        count = self._pickup_count()
        # the wait that ends the run (timeout=) carries no claim: nothing would run its tasks
        last = self.timeout is not None and end >= self.summary.started + self.timeout
        pickup = count > 0 and not last and self.backend.options["CLIENT_CLASS"] is None
        self._waiting = True
        try:
            waiting = not self._stopping and seconds > slack
            if waiting and pickup:
                if self._pickup(queues[0], keys, seconds - slack, count):
                    return
            elif waiting and wait_on(self.backend, keys, seconds - slack) is not None:
                return
        except Interrupted:
            return
        finally:
            self._waiting = False
        if slack:
            self._sleep(end - time.monotonic())

    def _pickup_count(self) -> int:
        """How many tasks the next round would claim (the solo batch, or the free slots)."""
        count, running = self.batch, 0
        if self._executor is not None:
            running = self._executor.running
            count = min(count, self._executor.free())
        if self.max_tasks is not None:
            count = min(count, self.max_tasks - self.summary.processed - running)
        return count

    def _pickup(self, queue: Queue, keys: list[str], seconds: float, count: int) -> bool:
        """Wait on ``keys`` with ``queue``'s claim behind the BLPOP; True if the wait was woken.

        A claim that came back is kept in ``_ready`` (with or without tasks: it is fresh).
        One whose reply was not read (the deadline passed, a stop signal, a lost reply) or
        that answered an error (``NOSCRIPT``: it did not run) is kept unanswered, so the next
        claim of the queue resends it with its request key (through the usual path, which
        reloads a script and sorts errors).
        """
        call = self._unanswered.pop(queue.name, None) or self._next_claim(queue, count)
        command = script(call.script).args([*queue.script_keys, *call.extra_keys], call.args)
        try:
            answer = wait_then(self.backend, keys, seconds, command)
        except BaseException:
            self._keep_unanswered(queue, call)
            raise
        if answer is None or isinstance(answer[1], Exception):
            self._keep_unanswered(queue, call)
            return answer is not None
        claim = call.parse(answer[1])
        self._hints[queue.name] = claim
        if self._live and claim.tasks:
            self._adopt(queue, claim)  # a lapsed lease of a run still going here (rare)
        self._ready[queue.name] = claim
        return True

    def _keep_unanswered(self, queue: Queue, call: Call[Claim]) -> None:
        self._unanswered[queue.name] = self._picked[queue.name] = call

    def _give_back_pickups(self) -> None:
        """Give back what idle waits claimed and no run started: the worker is stopping.

        A claim taken (``_ready``) is released; one whose reply was not read is sent once
        more with its request key but a count of 0, which answers what it took (if it
        ran) and claims nothing, and that is released. Best effort: Redis away, those
        tasks come back after their lease, no attempt charged.
        """
        for queue in self.queues:
            ready = self._ready.pop(queue.name, None)
            call = self._unanswered.get(queue.name)
            try:
                if call is not None and self._picked.get(queue.name) is call:
                    del self._unanswered[queue.name]
                    ready = queue._run(dataclasses.replace(call, args=[0, *call.args[1:]]))
                if ready is not None and ready.tasks:
                    self.summary.released += queue.release(ready.tasks)
            except OUTAGES as exc:
                logger.warning(
                    "could not give back what the idle wait may have claimed of %r: Redis is "
                    "unreachable (%s); those tasks come back after their lease",
                    queue.name,
                    exc,
                )
            except Exception as exc:  # run()'s finally: never hide what ended the run
                logger.error("could not give back the idle wait's claim: %s", exc, exc_info=exc)
        self._picked.clear()

    def _wait_seconds(self) -> float:
        cap = min(MAX_IDLE_WAIT, float(self.backend.options["SOCKET_TIMEOUT"]) - 0.5)
        if self.timeout is not None:
            cap = min(cap, self.timeout - self._elapsed())
        self._timed_wait = False  # True: the wait ends when a task or the rate limit is due
        for claim in self._hints.values():
            for moment in (claim.next_work, claim.next_lease_deadline):
                if moment is not None and (moment - claim.now) / 1e6 < cap:
                    cap = (moment - claim.now) / 1e6
                    self._timed_wait = moment == claim.next_work
        return max(cap, 0.01)
