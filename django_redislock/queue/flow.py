"""Flow control of a queue: pause and resume, and its rate limit, kept in Redis.

Both live in one hash per queue, ``<prefix>:{q:<name>}:flow`` (fields ``paused``;
``rate``, ``interval``, ``burst`` and ``tat`` of the rate limit), under the
queue's hash tag. The claim script (``queue_pop.lua``, through the ``flow``
fragment) reads it on every claim, so every worker of every host obeys a change
at its next claim, whatever its settings file says: a pause or a limit is
operational state (an incident, a struggling downstream API) that an operator
changes at run time from the admin, a command or the shell, not a deploy.

The limit is a GCRA (generic cell rate algorithm, a token bucket kept as one
timestamp): a rate ``N/period`` admits one task every ``period / N`` of server
time, and up to a tenth of a second's worth at once (at least one), so a fast
limit still lets a worker claim small batches. Tasks over the limit stay queued:
nothing is charged, and the claim tells the worker when the next one is allowed.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any, TypeVar

from ..exceptions import InvalidArgument
from ..validation import Rate, parse_rate
from .records import Call, Task

R = TypeVar("R")
#: The hash of a queue's flow state (pause, rate limit), next to its other keys.
FLOW_PART = "flow"
#: Outcomes of :meth:`FlowMixin.throttle`, from the throttle script's reply codes.
RUN, DEFERRED, LOST = "run", "deferred", "lost"
THROTTLE_RESULTS = {1: RUN, 2: DEFERRED, 0: LOST}
#: The throttle script's reply when the limit admits the task within the wait it was offered.
HELD = 3
#: Longest wait (µs) :meth:`FlowMixin.throttle` offers the limit at once, and how many times.
HOLD_MAX = 25_000
HOLD_TRIES = 3


def parse_flow(reply: list[Any]) -> dict[str, Any]:
    """The ``queue_flow`` reply: ``{"paused": bool, "rate_limit": str | None}``."""
    rate = reply[1].decode() if isinstance(reply[1], bytes) else str(reply[1])
    return {"paused": bool(int(reply[0])), "rate_limit": rate or None}


class FlowMixin:
    """The pause/resume and rate-limit methods of :class:`~django_redislock.queue.Queue`.

    Each is one call of ``queue_flow.lua`` (one round trip, atomic). Resending one
    (redis-py retries after a timeout) does the same thing twice, which ends in the
    same state: they are idempotent.
    """

    flow_key: str

    if TYPE_CHECKING:  # provided by QueueCalls

        def _run(self, call: Call[R]) -> R: ...

        async def _arun(self, call: Call[R]) -> R: ...

        def request_key(self) -> str: ...

    def _flow_call(self, *args: Any) -> Call[dict[str, Any]]:
        return Call("queue_flow", list(args), parse_flow, (self.flow_key,))

    def _limit_call(self, rate: str | None) -> Call[dict[str, Any]]:
        if rate is None:
            return self._flow_call("unlimit")
        parsed = parse_rate(rate)
        return self._flow_call("limit", parsed.interval, parsed.burst, parsed.text)

    def pause(self) -> None:
        """Stop handing out this queue's tasks until :meth:`resume`; enqueueing goes on.

        Claims (``pop``, workers) take nothing from a paused queue; running tasks
        finish and are acked, and expired leases still come back to the queue.
        """
        self._run(self._flow_call("pause"))

    async def pause_async(self) -> None:
        """The asyncio twin of :meth:`pause`."""
        await self._arun(self._flow_call("pause"))

    def resume(self) -> None:
        """Hand out tasks again after :meth:`pause`, waking an idle worker at once."""
        self._run(self._flow_call("resume"))

    async def resume_async(self) -> None:
        """The asyncio twin of :meth:`resume`."""
        await self._arun(self._flow_call("resume"))

    def flow_state(self) -> dict[str, Any]:
        """``{"paused": bool, "rate_limit": "100/m" or None}`` in one round trip."""
        return self._run(self._flow_call("read"))

    async def flow_state_async(self) -> dict[str, Any]:
        """The asyncio twin of :meth:`flow_state`."""
        return await self._arun(self._flow_call("read"))

    def is_paused(self) -> bool:
        """True while the queue is paused."""
        return bool(self._run(self._flow_call("read"))["paused"])

    async def is_paused_async(self) -> bool:
        """The asyncio twin of :meth:`is_paused`."""
        return bool((await self._arun(self._flow_call("read")))["paused"])

    def set_rate_limit(self, rate: str | None) -> None:
        """Hand out at most ``rate`` tasks (``"100/m"``, ``"20/s"``, ``"5/h"``); None: no limit.

        Stored in Redis, so every worker obeys it from its next claim. A different
        limit starts afresh (a first burst is admitted at once); the same one again
        keeps its state, so a resent call admits nothing extra.
        """
        self._run(self._limit_call(rate))

    async def set_rate_limit_async(self, rate: str | None) -> None:
        """The asyncio twin of :meth:`set_rate_limit`."""
        await self._arun(self._limit_call(rate))

    def rate_limit(self) -> str | None:
        """The queue's rate limit as it was set (``"100/m"``), or None."""
        rate: str | None = self._run(self._flow_call("read"))["rate_limit"]
        return rate

    async def rate_limit_async(self) -> str | None:
        """The asyncio twin of :meth:`rate_limit`."""
        rate: str | None = (await self._arun(self._flow_call("read")))["rate_limit"]
        return rate

    # -- a task's own rate limit -----------------------------------------------------------

    def _throttle_call(self, task: Task, name: str, rate: Rate) -> Call[str]:
        """One check that never waits: the task runs now or goes back to the queue."""
        args, extra = self._throttle_args(task, name, rate, 0)
        return Call("queue_throttle", args, lambda reply: THROTTLE_RESULTS[int(reply[0])], extra)

    def _throttle_hold_call(
        self, task: Task, name: str, rate: Rate, hold: int
    ) -> Call[tuple[int, int]]:
        """One check that may answer "wait this many µs" (:data:`HELD`), up to ``hold``."""
        args, extra = self._throttle_args(task, name, rate, hold)
        return Call("queue_throttle", args, lambda reply: (int(reply[0]), int(reply[1])), extra)

    def _throttle_args(
        self, task: Task, name: str, rate: Rate, hold: int
    ) -> tuple[list[Any], tuple[str, str]]:
        from ..validation import check_id
        from .records import Task

        if not isinstance(task, Task):
            raise InvalidArgument(f"task must be a Task returned by claim(), got {task!r}")
        check_rate(rate)
        field = f"task:{check_id(name, 'name')}"
        suspect = "1" if task.suspect else "0"
        args = [task.id, task.claim, field, rate.interval, rate.burst, suspect, hold]
        return args, (self.flow_key, self.request_key())

    def throttle(self, task: Task, name: str, rate: Rate) -> str:
        """Check a claimed task against the rate limit ``name`` (``rate``) before running it.

        Returns ``"run"`` (counted against the limit: run it now), ``"deferred"``
        (over the limit: the task is back in the queue, due when the limit admits it,
        its claim ended and no attempt counted: do not run it) or ``"lost"`` (the
        claim is no longer current: do not run it). ``drain_queue`` calls it for
        every task declared with ``@task(rate_limit=...)``, naming the limit by the
        task's path. Safe to resend (a request key keeps the first answer).

        When the limit admits the task within :func:`hold_for` (half an interval, at
        most 25 ms) it waits here for that and checks again (:data:`HOLD_TRIES` checks at
        most) rather than giving it back: a task given back earlier comes due on its
        slot, and a worker that wakes for it a few ms before the run ahead of it made
        room would otherwise send it to the end of the line and leave the slot unused.
        """
        for hold in holds(rate):
            code, wait = self._run(self._throttle_hold_call(task, name, rate, hold))
            if code != HELD:
                break
            time.sleep(wait / 1e6)
        return THROTTLE_RESULTS[code]  # the last try offers no wait: never HELD

    async def throttle_async(self, task: Task, name: str, rate: Rate) -> str:
        """The asyncio twin of :meth:`throttle`."""
        for hold in holds(rate):
            code, wait = await self._arun(self._throttle_hold_call(task, name, rate, hold))
            if code != HELD:
                break
            await asyncio.sleep(wait / 1e6)
        return THROTTLE_RESULTS[code]  # the last try offers no wait: never HELD


def check_rate(rate: Any) -> Rate:
    """``rate`` if it is a :class:`Rate`, else :class:`InvalidArgument` naming ``rate``."""
    if not isinstance(rate, Rate):
        raise InvalidArgument(f"rate must be a Rate from parse_rate(), got {rate!r}")
    return rate


def hold_for(rate: Rate) -> int:
    """The wait (µs) a check offers ``rate``: half an interval, at most :data:`HOLD_MAX`.

    Long enough to absorb how late a worker wakes for a task's slot; short enough
    that a task whose slot is another task's (an interval away) is still given back.
    """
    return min(rate.interval // 2, HOLD_MAX)


def holds(rate: Rate) -> list[int]:
    """The waits offered by the tries of one :meth:`FlowMixin.throttle`: the last offers none."""
    return [hold_for(check_rate(rate))] * (HOLD_TRIES - 1) + [0]
