"""``TaskFunction.enqueue_many``: many calls of one task, validated first, then sent a batch
per round trip (plain, checking ``unique_for``, marked for their results, or grouped)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from django.db import transaction

from ..validation import check_count
from .arguments import enqueue_args
from .call_options import in_transaction
from .groups import group_args, send_grouped
from .handles import Enqueued
from .priority import check_priority
from .queue import Queue
from .records import Entry
from .results import MARKER, eager_outcome, marker, send_marked


def send_many(
    fn: Any,
    calls: Iterable[tuple[Sequence[Any], Mapping[str, Any]]],
    delay: float,
    batch_size: int,
    priority: int | None,
) -> list[Enqueued]:
    """What :meth:`~.task_function.TaskFunction.enqueue_many` does; ``fn`` is the task."""
    queue: Queue = fn.queue
    check_count(batch_size, "batch_size", allow_zero=False)
    level = fn.priority if priority is None else check_priority(priority)
    ttl = fn.ttl_of_results(queue)
    entries, gens, groups = [], [], []
    for args, kwargs in calls:
        payload = fn.payload(args, kwargs)
        task_id = fn.task_id(payload, None)
        if fn.group is not None:
            groups.append(fn.group.group_of(*fn.call_of(payload)))
        if ttl is not None:
            payload[MARKER] = marker(queue, ttl)
            gens.append(payload[MARKER]["gen"])
        entries.append(queue.prepare(task_id, payload, delay))
    options = queue.backend.options
    results = [Enqueued(entry.id, queue=queue) for entry in entries]
    if options["EAGER"]:
        for result, entry in zip(results, entries, strict=True):
            value = fn.run(queue.serializer.loads(entry.data))
            result._known = eager_outcome(queue, value, ttl)
        return results

    def send_batch(batch: list[Entry], start: int) -> Sequence[int]:
        args = enqueue_args(batch, False, level)
        if fn.group is not None:
            pairs = list(zip(batch, groups[start : start + len(batch)], strict=True))
            args = group_args(args[0], fn.group.limits, pairs)
            if ttl is None:
                return send_grouped(queue, args)
            marks = [(e.id, e.data, gens[start + i]) for i, e in enumerate(batch)]
            return send_marked(queue, args, marks, ttl + delay, grouped=True)
        if fn.unique_for is not None:
            args[0] = "u" + args[0]
        if ttl is None:
            if fn.unique_for is not None:
                return queue.send_unique(args)
            return queue.enqueue_prepared(batch, False, level)
        marks = [(e.id, e.data, gens[start + i]) for i, e in enumerate(batch)]
        return send_marked(queue, args, marks, ttl + delay)

    def send() -> None:
        for start in range(0, len(entries), batch_size):
            codes = send_batch(entries[start : start + batch_size], start)
            for result, code in zip(results[start:], codes, strict=False):
                result._set_code(code)

    if options["COMMIT_MODE"] == "on_commit" and in_transaction():
        transaction.on_commit(send)
    else:
        send()
    return results
