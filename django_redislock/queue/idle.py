"""How a worker waits when no queue has work: a blocking wait on the queues' signal lists.

The idle half of :class:`~django_redislock.queue.worker.Worker`: it blocks (never
busy-polls) until a task is enqueued, the next delayed task or lease deadline comes due,
or a stop signal cuts the wait short. See docs/calls.md ("Blocking waits") for the wait
itself and its deadline.
"""

from __future__ import annotations

import time
from typing import Any

from ..calls.wait import wait_on
from .queue import Queue
from .records import Claim
from .runs import Runs
from .stops import Interrupted

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
    timeout: float | None
    _hints: dict[str, Claim]
    _stopping: bool
    _waiting: bool
    _timed_wait: bool

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
        """BLPOP on the queues' signal lists for up to ``seconds`` (a stop signal cuts it)."""
        self._flush_acks(force=True)
        keys = [queue.signal_key for queue in self.queues]
        if self.backend.is_cluster and len(keys) > 1:
            # a BLPOP on a Cluster takes keys of one slot; wait on the queues in turn
            keys = [keys[int(time.monotonic()) % len(keys)]]
            seconds = min(seconds, 1.0)
        slack = BLOCK_SLACK if self._timed_wait else 0.0  # see BLOCK_SLACK
        end = time.monotonic() + seconds
        self._waiting = True
        try:
            waiting = not self._stopping and seconds > slack
            if waiting and wait_on(self.backend, keys, seconds - slack) is not None:
                return
        except Interrupted:
            return
        finally:
            self._waiting = False
        if slack:
            self._sleep(end - time.monotonic())

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
