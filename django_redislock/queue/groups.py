"""Concurrency groups: ``@task(group_key=..., group_concurrency=N, group_rate_limit="10/s")``.

A task call's group is what ``group_key`` returns for its arguments (a tenant, a customer).
At most ``group_concurrency`` tasks of a group are *admitted* at a time (ready in the queue
or running); the others are *held* out of the ready set, so a claim never looks at them and
costs what it costs without groups. When an admitted task ends (acknowledged, dead-lettered,
cancelled, removed) or is retried, its slot goes to the next held task of its group, which
joins the END of the ready set: when every group has a backlog, the ready set holds a few
tasks of each group in the order their groups got a slot, so one tenant's million tasks do
not starve another tenant's one (round-robin). ``group_rate_limit`` spaces the admissions of
a group (a GCRA, as the queue's own rate limit). Everything is in the scripts that enqueue,
claim, ack and retry (docs/queue.md, "Concurrency groups"; ``fragments/groups.lua``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..exceptions import InvalidArgument
from ..validation import Rate, check_count, parse_rate
from .records import Call, Entry

if TYPE_CHECKING:
    from .queue import Queue

#: The longest group a ``group_key`` may return (characters).
MAX_GROUP = 200


@dataclass(frozen=True)
class GroupSpec:
    """The group options of one ``@task``: how a call's group is found, and its limits."""

    key: Callable[..., Any]
    concurrency: int
    rate: Rate | None

    @property
    def limits(self) -> str:
        """The groups fragment's ``"<concurrency>,<interval µs>,<burst>"``."""
        if self.rate is None:
            return f"{self.concurrency},0,1"
        return f"{self.concurrency},{self.rate.interval},{self.rate.burst}"

    def group_of(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> str:
        """The group of a call: ``group_key(*args, **kwargs)``, checked to be a short string."""
        group = self.key(*args, **kwargs)
        if not isinstance(group, str) or not 0 < len(group) <= MAX_GROUP:
            raise InvalidArgument(
                f"group_key must return a non-empty string of at most {MAX_GROUP} characters, "
                f"got {group!r}; nothing was queued"
            )
        return group


def check_group(
    group_key: Callable[..., Any] | None, concurrency: int | None, rate_limit: str | None
) -> GroupSpec | None:
    """The group options of ``@task``, checked (None when the task has no group)."""
    if group_key is None:
        if concurrency is not None or rate_limit is not None:
            raise InvalidArgument("group_concurrency and group_rate_limit need a group_key")
        return None
    if not callable(group_key):
        raise InvalidArgument(
            f"group_key must be a callable taking the task's arguments, got {group_key!r}"
        )
    limit = (
        1
        if concurrency is None
        else check_count(concurrency, "group_concurrency", allow_zero=False)
    )
    rate = None if rate_limit is None else parse_rate(rate_limit, "group_rate_limit")
    return GroupSpec(group_key, limit, rate)


def group_args(flag: str, limits: str, entries: Sequence[tuple[Entry, str]]) -> list[Any]:
    """The ARGV of ``queue_group_enqueue.lua``: flag, limits, then id/delay/data/group."""
    args: list[Any] = [flag, limits]
    for entry, group in entries:
        args += [entry.id, entry.delay, entry.data, group]
    return args


def send_grouped(queue: Queue, args: list[Any]) -> list[int]:
    """Run ``queue_group_enqueue.lua`` with ``args`` (see :func:`group_args`); its codes."""
    queue.backend.register_queue(queue.name)
    extra: tuple[str, ...] = (queue.rates_key, *queue.group_keys, queue.flow_key)
    if args[0][:1] == "1":  # replacing: a request key makes a resend harmless
        extra += (queue.request_key(),)
    return queue._run(Call("queue_group_enqueue", args, _codes, extra))


def _codes(reply: list[Any]) -> list[int]:
    return [int(code) for code in reply]


@dataclass(frozen=True)
class GroupInfo:
    """One group of a queue as :func:`groups` reads it."""

    name: str
    running: int  # admitted: ready in the queue or running
    limit: int
    held: int  # waiting for a slot (or for their due time, or the group's rate)
    rate: str  # "" without a rate limit, else "<tasks>/s"
    waits_until: int | None  # server µs the next held task may be admitted, if known


def groups(queue: Queue, count: int = 200) -> list[GroupInfo]:
    """Up to ``count`` groups of ``queue`` that have admitted or held tasks (one script)."""
    script, keys, args = groups_call(queue, count)
    return parse_groups(queue.backend.script(script)(keys=keys, args=args))


def groups_call(queue: Queue, count: int = 200) -> tuple[str, list[str], list[Any]]:
    """The script call of :func:`groups` (the admin's queue page sends it in its pipeline)."""
    check_count(count, "count", allow_zero=False)
    return "queue_groups", list(queue.group_keys[:3]), [count]  # hold, groups, wait


def parse_groups(reply: Any) -> list[GroupInfo]:
    """The groups in a ``queue_groups`` reply."""
    out = []
    for i in range(0, len(reply), 6):
        name, running, spec, held, tat, wait = reply[i : i + 6]
        limit, interval, _burst = (int(part) for part in _text(spec).split(","))
        rate = "" if not interval else f"{1_000_000 / interval:g}/s"
        until = int(wait) if _text(wait) else None
        del tat
        out.append(GroupInfo(_text(name), int(running), limit, int(held), rate, until))
    return out


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
