"""Task history: the last runs of each task, for the dashboard's task page.

Kept per queue in a hash (``Queue.history_key``: id -> JSON list of the task's
last :data:`RUNS` runs) and a sorted set (``Queue.history_index_key``: id -> time
of its last recorded run) that bounds the hash to the :data:`TASKS` tasks with
the most recent runs: older ones are dropped as new ones come, so memory is
bounded whatever a queue does, a task retried 5,000 times included (its last 10
runs). Each run's error is capped at 1,500 characters (the message and the end
of the traceback). Both keys expire a week after their last write.

Written by the retry script (``queue_retry.lua``, via the ``history`` fragment)
in the same call that retries or dead-letters the task: no round trip of its
own. The success of a task that had failed before (it carries a last error) is
recorded by the worker in its outcome batch, once a second
(:func:`.runlog.add_to_pipeline`, with every success for the queue's run log), so
the history of a finished task ends with it (first successes are not recorded
here: they have no history to end; the run log has them). A lease that
expired (its worker died) is not a run here: the attempt numbers show the gap,
and the task's last error says so.
History is not deleted with the task (the ack, remove and purge scripts are
untouched): it ages out as above, and a task queued again under an old id
starts a new history at its first failed run (an attempt number that does not
follow the last one).
"""

from __future__ import annotations

import json
import os
import re
import socket
from dataclasses import dataclass
from datetime import datetime
from datetime import timezone as dt_timezone
from functools import cache
from typing import Any

#: Runs kept per task, tasks kept per queue (as in ``fragments/history.lua``).
RUNS = 10
TASKS = 1000


#: The head of a JSON ``@task`` envelope: the function it names.
_HEAD = re.compile(rb'^\{"(?:django_)?task": ?"([^"\\]{1,200})"')


def function_of(task: Any) -> str:
    """The task function ``task``'s payload names, for its history; "" when it names none.

    Never decodes a payload for this (a pickled one would run code): a payload the
    worker decoded already is read as such, another one only if it is a JSON envelope
    whose first field is ``task`` (what ``@task`` writes).
    """
    decoded = getattr(task, "_decoded", None)
    if isinstance(decoded, dict):
        for key in ("task", "django_task"):
            if isinstance(decoded.get(key), str):
                return str(decoded[key])[:200]
        return ""
    raw = getattr(task, "raw_payload", b"")
    if isinstance(raw, str):
        raw = raw.encode()
    found = _HEAD.match(raw[:300]) if isinstance(raw, bytes) else None
    return found[1].decode("utf-8", "replace") if found else ""


@cache
def _host() -> str:
    return socket.gethostname()


def worker_id() -> str:
    """``host:pid`` of this process (recomputed after a fork)."""
    return f"{_host()}:{os.getpid()}"


@dataclass(frozen=True)
class Run:
    """One recorded run of a task."""

    attempt: int
    ended: datetime
    runtime: float | None
    worker: str
    outcome: str
    error: str
    #: The task function its payload named ("" when not known: recorded before it was kept,
    #: or by a caller of ``retry`` whose payload names none).
    function: str = ""

    @property
    def started(self) -> datetime | None:
        """When the run began (its end minus its duration), if the duration is known."""
        if self.runtime is None:
            return None
        return datetime.fromtimestamp(self.ended.timestamp() - self.runtime, dt_timezone.utc)


def parse(raw: Any) -> list[Run]:
    """The runs in a history field (oldest first); junk written by others gives no runs."""
    if not raw:
        return []
    try:
        items = json.loads(raw)
    except (ValueError, TypeError):
        return []
    if not isinstance(items, list):
        return []
    runs = []
    for item in items:
        try:
            runtime = item.get("runtime")
            runs.append(
                Run(
                    attempt=int(item["attempt"]),
                    ended=datetime.fromtimestamp(int(item["end"]) / 1000, dt_timezone.utc),
                    runtime=None if runtime is None else float(runtime) / 1e6,
                    worker=str(item.get("worker", "")),
                    outcome=str(item.get("outcome", "")),
                    error=str(item.get("error", "")),
                    function=str(item.get("fn", "")),
                )
            )
        except (KeyError, ValueError, TypeError, AttributeError, OverflowError, OSError):
            continue
    return runs


def read(queue: Any, id: str) -> list[Run]:
    """The recorded runs of task ``id`` (one script call)."""
    backend = queue.backend
    with backend.errors():
        raw = backend.script("history_get")(keys=[queue.history_key], args=[id])
    return parse(raw)
