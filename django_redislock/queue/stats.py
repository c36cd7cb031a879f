"""One queue's numbers at one instant, as one record: :class:`QueueStats`.

Every reader of a queue's numbers (``Queue.stats()``, the admin overview and
queue pages, the metrics scrape) sends the same script, ``queue_summary.lua``,
and reads its reply through :meth:`QueueStats.from_reply`, so a count means the
same thing on every surface. The script reads counts and the first members of
sorted sets, never a scan: it costs the same for ten tasks as for a million.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..wire import to_text

if TYPE_CHECKING:
    from .calls import QueueCalls

#: The script every summary of a queue is read with.
SUMMARY_SCRIPT = "queue_summary"
#: Fields of the script's reply before the counters hash.
HEAD = 11


def counters_key(queue: QueueCalls) -> str:
    """The hash of a queue's outcome counters (``succeeded``, ``failed``, ``retried``, ``dead``).

    Workers add to it with ``HINCRBY`` at most every
    :data:`~.outcomes.COUNTER_INTERVAL` seconds and when they stop, so the
    counters cost one round trip per second per worker, not one per task; a
    worker killed with SIGKILL loses at most that last second. The key shares
    the queue's hash tag but is not in ``Queue.keys``: a purge keeps it, as
    monotonic counters should survive.
    """
    return queue.backend.key(f"q:{queue.name}", "counters")


def summary_extra_keys(queue: QueueCalls) -> tuple[str, str, str]:
    """The script's keys after the queue's ``script_keys``: the flow and counters hashes and
    the concurrency groups' held tasks."""
    return (queue.flow_key, counters_key(queue), queue.group_keys[0])


def summary_call(
    queue: QueueCalls, counters: Sequence[str] = ()
) -> tuple[str, list[str], list[Any]]:
    """``(script, keys, args)`` of one summary, for a pipeline of several queues.

    ``counters`` names the outcome counters to read too (none by default: only
    the metrics scrape exports them). They are named, not read whole, so a
    summary reads a bounded number of fields whatever else the hash holds.
    """
    return (SUMMARY_SCRIPT, [*queue.script_keys, *summary_extra_keys(queue)], list(counters))


def stats_or_error(queue: str, reply: Any, counters: Sequence[str] = ()) -> QueueStats | Exception:
    """A pipelined summary reply as a record, or the error it holds or raises when read.

    A pipeline of several queues returns each queue's error in its place (a
    key of the wrong type, a script error); callers show that queue as broken
    and carry on with the others.
    """
    if isinstance(reply, Exception):
        return reply
    try:
        return QueueStats.from_reply(queue, reply, counters)
    except ValueError as exc:
        return exc


def _score(value: Any) -> int | None:
    """A score of the reply, or None for the script's ``-1`` (no such member)."""
    number = int(float(value))
    return number if number >= 0 else None


@dataclass(frozen=True)
class QueueStats:
    """A queue's counts by state, its oldest due task and earliest lease, flow and counters.

    Times are Redis server microseconds (``now`` is the server's clock when it
    read them), so ages are exact whatever the clock of the reading process.
    """

    queue: str
    now: int
    ready: int
    delayed: int
    in_flight: int
    dead: int
    #: Score (due time) of the task that has been due longest; None when nothing is ready.
    oldest_due: int | None
    #: The earliest lease deadline of an in-flight task; None when nothing is in flight.
    next_lease: int | None
    #: In-flight tasks whose lease has ended (waiting for recovery by the next claim).
    expired_leases: int
    paused: bool
    #: The rate limit as written (``"100/s"``), or None.
    rate_limit: str | None
    #: Run outcomes counted by workers (``succeeded``, ``failed``, ...), those that were
    #: asked for (see :func:`summary_call`); do not modify.
    counters: Mapping[str, int] = field(default_factory=dict)
    #: Tasks concurrency groups hold back until their group has a slot (not in the counts
    #: above: they are in none of the queue's states yet).
    held: int = 0

    @classmethod
    def from_reply(
        cls, queue: str, reply: Sequence[Any], counters: Sequence[str] = ()
    ) -> QueueStats:
        """Read a ``queue_summary`` reply sent with ``counters`` as its ARGV.

        A malformed reply raises ``ValueError``.
        """
        try:
            now, due, pending, flying, dead = (int(float(v)) for v in reply[:5])
            first, lease = _score(reply[5]), _score(reply[6])
            values = [int(value) for value in reply[HEAD:]]
            if len(values) != len(counters):
                raise ValueError(f"{len(values)} counter values for {len(counters)} counters")
            return cls(
                queue=queue,
                now=now,
                ready=due,
                delayed=pending - due,
                in_flight=flying,
                dead=dead,
                oldest_due=first if first is not None and first <= now else None,
                next_lease=lease,
                expired_leases=int(reply[7]),
                paused=bool(int(reply[8])),
                rate_limit=to_text(reply[9]) or None,
                held=int(reply[10]),
                counters=dict(zip(counters, values, strict=True)),
            )
        except (TypeError, IndexError, ValueError) as exc:
            raise ValueError(f"queue {queue!r}: unreadable summary reply: {exc}") from exc

    @property
    def total(self) -> int:
        """Tasks in every state."""
        return self.ready + self.delayed + self.in_flight + self.dead

    @property
    def oldest_due_age(self) -> float | None:
        """Seconds the oldest ready task has been due; None when nothing is ready."""
        return None if self.oldest_due is None else (self.now - self.oldest_due) / 1e6

    @property
    def next_lease_in(self) -> float | None:
        """Seconds until the earliest lease ends (negative: it has ended); None if none."""
        return None if self.next_lease is None else (self.next_lease - self.now) / 1e6

    def as_dict(self) -> dict[str, Any]:
        """The dict of :meth:`Queue.stats() <django_redislock.queue.Queue.stats>`."""
        return {
            "queue": self.queue,
            "ready": self.ready,
            "delayed": self.delayed,
            "in_flight": self.in_flight,
            "dead": self.dead,
            "expired_leases": self.expired_leases,
            "oldest_due_age": self.oldest_due_age or 0.0,
            "paused": self.paused,
            "rate_limit": self.rate_limit,
        }
