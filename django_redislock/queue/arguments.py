"""The arguments the queue scripts take: task references, list cursors and enqueue ARGV.

Each builder checks what it is given and raises :class:`InvalidArgument` naming the
argument before anything is sent, so a bad call leaves Redis unchanged.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Mapping
from typing import Any

from ..exceptions import InvalidArgument
from ..validation import check_id
from .priority import DEFAULT_PRIORITY, check_priority, enqueue_flag
from .records import Entry, Task

TaskRef = Task | str
#: Where a page of :meth:`Queue.tasks` starts: after this task, or this ``(score, id)``.
Cursor = Task | tuple[int, str] | None


def cursor_of(after: Cursor) -> tuple[int, str] | None:
    """The ``(score, id)`` a page starts after; ``after`` is a task, such a pair, or None."""
    if after is None:
        return None
    if isinstance(after, Task):
        return after.score, after.id
    if (
        isinstance(after, tuple)
        and len(after) == 2
        and isinstance(after[0], int)
        and not isinstance(after[0], bool)
        and isinstance(after[1], str)
    ):
        return after
    raise InvalidArgument(f"after must be a Task or a (score, id) pair, got {after!r}")


def enqueue_args(
    entries: Iterable[Entry], replace: bool, priority: int = DEFAULT_PRIORITY
) -> list[Any]:
    """The enqueue script's ARGV: the replace flag and level, then id, delay, data per entry."""
    args: list[Any] = [enqueue_flag(replace, check_priority(priority))]
    for entry in entries:
        args += [entry.id, entry.delay, entry.data]
    return args


def parse_flags(reply: list[Any]) -> list[bool]:
    """The enqueue script's reply: 1 queued (or rescheduled), 0 an earlier copy was kept."""
    return [bool(flag) for flag in reply]


def parse_codes(reply: list[Any]) -> list[int]:
    """The enqueue script's reply as codes: 1 queued, 0 a copy kept, 2 refused (unique_for)."""
    return [int(code) for code in reply]


def claim_refs(refs: TaskRef | Iterable[TaskRef], argument: str = "task") -> list[str]:
    """``[id, claim token, ...]`` for tasks and ids; a bare id's token is "" (any claim)."""
    if isinstance(refs, (Task, str)):
        refs = [refs]
    if isinstance(refs, bytes) or not isinstance(refs, Iterable):
        raise InvalidArgument(f"{argument} must be a Task, an id or a list of them")
    pairs: list[str] = []
    for i, ref in enumerate(refs):
        if isinstance(ref, Task):
            pairs += [ref.id, ref.claim]
        else:
            pairs += [check_id(ref, f"{argument}[{i}]"), ""]
    return pairs


def ack_refs(refs: TaskRef | Iterable[TaskRef], argument: str = "task") -> list[str]:
    """``"<claim token>:<id>"`` per task or id (the ack scripts' ARGV; a bare id: any claim).

    A task whose run opens a ``unique_for`` window (:attr:`Task.unique_for`) is sent as
    ``"<claim token>+<milliseconds>:<id>"``.
    """
    if isinstance(refs, (Task, str)):
        refs = [refs]
    elif isinstance(refs, Iterable) and not isinstance(refs, bytes):
        refs = list(refs)
    pairs = claim_refs(refs, argument)
    out = [f"{pairs[i + 1]}:{pairs[i]}" for i in range(0, len(pairs), 2)]
    for i, ref in enumerate(refs if isinstance(refs, list) else ()):
        if isinstance(ref, Task) and ref.unique_for:
            out[i] = f"{ref.claim}+{math.ceil(ref.unique_for * 1000)}:{ref.id}"
    return out


def backoff_delay(
    options: Mapping[str, Any],
    attempts: int,
    base: float | None = None,
    cap: float | None = None,
    jitter: bool | None = None,
) -> float:
    """The retry delay after ``attempts`` runs: exponential, capped, with jitter.

    ``base`` and ``cap`` replace ``OPTIONS['RETRY_BACKOFF']`` and
    ``OPTIONS['RETRY_BACKOFF_MAX']`` (a ``@task``'s own ``retry_backoff`` and
    ``retry_backoff_max``), ``jitter`` ``OPTIONS['RETRY_JITTER']`` (``retry_jitter``).
    """
    base = options["RETRY_BACKOFF"] if base is None else base
    cap = options["RETRY_BACKOFF_MAX"] if cap is None else cap
    exponent = min(max(attempts - 1, 0), 60)
    delay = min(cap, base * 2**exponent)
    jitter = options["RETRY_JITTER"] if jitter is None else jitter
    return delay * random.uniform(0.5, 1.0) if jitter else float(delay)
