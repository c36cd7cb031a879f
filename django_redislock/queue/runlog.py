"""The run log: every finished run of a queue's tasks, for the dashboard's recent runs.

Kept per queue in two capped lists, newest first (``Queue.runs_ok_key``: the
successes; ``Queue.runs_failed_key``: every other end of a run, failed and
retried, dead-lettered, cancelled, expired), each at most :data:`KEEP` entries and
expiring a week after its last write: a burst of successes never pushes the
failures out. An entry is ``<end ms>:<JSON>`` with the task id, attempt, runtime
(µs), worker (``host:pid``), outcome, task function, exception type and the first
:data:`ERROR_CHARS` characters of the error (the task page's history keeps more
of it), so the memory of a queue's log is bounded whatever the queue does:
measured in docs/admin.md (about 0.2 MB for 1,000 successes, 0.4 MB for 1,000
failures with long errors).

Written with no round trip of its own, in the call that ends the run:

* a success by the worker, in the outcome batch it sends once a second with the
  counters, rate buckets and per-function tallies (:func:`add_to_pipeline`, the
  ``history_add`` script: one call per queue per batch, one ``LPUSH`` of all its
  runs); its end time is the batch's server time minus the milliseconds since
  the run ended, measured by the worker;
* every other end by the script that ends it: ``queue_retry.lua`` (a failure
  retried or dead-lettered, a task buried or postponed, a cancelled or expired
  run) and ``queue_cancel.lua`` (a queued task cancelled).

A worker killed with SIGKILL loses the successes of its last second (as it loses
their counts); a lease that expired (its worker died) is no run here.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from datetime import datetime
from datetime import timezone as dt_timezone
from json.encoder import encode_basestring
from typing import Any

from ..calls.batch import Batch
from ..locking.pipeline import run_scripts
from ..wire import to_text
from .history import worker_id

#: Entries kept per list (successes; other ends), and characters of an error kept (as in
#: ``fragments/runlog.lua``).
KEEP = 1000
ERROR_CHARS = 200

#: One success the worker records: task id, attempt, runtime (s), function, whether the task
#: had failed before (its history gets the run too), the run's end (``time.monotonic()``).
Success = tuple[str, int, float, str, bool, float]


@dataclass(frozen=True)
class LoggedRun:
    """One finished run in the log."""

    id: str
    attempt: int
    ended: datetime
    runtime: float | None
    worker: str
    outcome: str
    function: str
    #: The exception type its error names ("" for a success or an error without one).
    error_type: str
    #: The first :data:`ERROR_CHARS` characters of its error ("" for a success).
    error: str


def parse_entry(raw: Any) -> LoggedRun | None:
    """An entry as the scripts write it; None for junk (another program's)."""
    text = to_text(raw)
    head, colon, body = text.partition(":")
    try:
        item = json.loads(body) if colon else None
        if not isinstance(item, dict):
            return None
        runtime = item.get("r")
        return LoggedRun(
            id=str(item["i"]),
            attempt=int(item.get("a", 0)),
            ended=datetime.fromtimestamp(int(head) / 1000, dt_timezone.utc),
            runtime=None if runtime is None else float(runtime) / 1e6,
            worker=str(item.get("w", "")),
            outcome=str(item.get("o", "")),
            function=str(item.get("f", "")),
            error_type=str(item.get("t", "")),
            error=str(item.get("x", "")),
        )
    except (KeyError, ValueError, TypeError, OverflowError, OSError):
        return None


def entry_json(id: str, attempt: int, micros: int, function_json: str, worker_json: str) -> str:
    """A success's entry (without its end time, which the script prefixes), as the runlog
    fragment writes one, with the function and worker already JSON strings: made here, in
    the worker (a process that scales out), instead of by the server's one thread."""
    return (
        f'{{"i":{_quote(id)},"a":{attempt},"r":{micros},"w":{worker_json},'
        f'"o":"succeeded","f":{function_json}}}'
    )


#: A str as a JSON string (the json module's C function: about 0.2 µs).
_quote = encode_basestring


def add_to_pipeline(batch: Batch, queue: Any, runs: list[Success]) -> None:
    """Add the call that records the successes ``runs`` (oldest first) to ``batch``.

    Of more than :data:`KEEP` runs (a busy second) only the last :data:`KEEP` are entered
    in the log (the list would drop the others at once); every run that ends a task's
    history is sent for it. An ``EVALSHA`` like every call of the worker's outcome batch
    (sent with ``resend="missing"``: after ``NOSCRIPT`` only the calls that did not run
    are sent again, so no run is recorded twice; see ``docs/calls.md``).
    """
    if not runs:
        return
    sent = time.monotonic()
    worker = worker_id()
    worker_json = _quote(worker)
    names: dict[str, str] = {}  # a batch's runs name a few functions
    logged = runs[-KEEP:]
    args: list[Any] = [worker, len(logged)]
    for id, attempt, seconds, function, _, ended in logged:
        name = names.get(function)
        if name is None:
            name = names[function] = _quote(function[:200])
        ago = int((sent - ended) * 1000)
        args += [
            ago if ago > 0 else 0,
            entry_json(id, attempt, int(seconds * 1e6), name, worker_json),
        ]
    for id, attempt, seconds, function, recovered, _ in runs:
        if recovered:
            args += [id, attempt, round(seconds * 1e6), function]
    keys = [queue.history_key, queue.history_index_key, queue.runs_ok_key]
    batch.add("history_add", keys, args)


@dataclass(frozen=True)
class Search:
    """What the runs asked for must match ("" or None: any)."""

    function: str = ""
    error_type: str = ""
    worker: str = ""
    outcome: str = ""
    #: Ended at or after / before these times.
    since: datetime | None = None
    until: datetime | None = None
    #: Ended at most this many seconds ago (by the server's clock).
    within: int | None = None


def _ms(moment: datetime | None) -> str:
    return "" if moment is None else str(int(moment.timestamp() * 1000))


def read_call(
    queue: Any, search: Search, skip: int, count: int
) -> tuple[str, list[str], list[Any]]:
    """The read script of a page of ``queue``'s log, to send with a page's other scripts."""
    args = [
        skip,
        count,
        search.function.lower(),
        search.error_type,
        search.worker.lower(),
        search.outcome,
        _ms(search.since),
        _ms(search.until),
        "" if search.within is None else search.within,
    ]
    return ("runs_recent", [queue.runs_ok_key, queue.runs_failed_key], args)


@dataclass(frozen=True)
class Page:
    """A page of the log: the server's time, entries kept, entries matching, the runs."""

    now: datetime
    kept: int
    matched: int
    runs: list[LoggedRun]


def parse(reply: Any) -> Page:
    runs = [run for run in map(parse_entry, reply[3:]) if run is not None]
    now = datetime.fromtimestamp(int(reply[0]) / 1e6, dt_timezone.utc)
    return Page(now, int(reply[1]), int(reply[2]), runs)


def read(queue: Any, search: Search | None = None, skip: int = 0, count: int = 2 * KEEP) -> Page:
    """A page of ``queue``'s finished runs matching ``search``, newest first (one script)."""
    call = read_call(queue, search or Search(), skip, count)
    (reply,) = run_scripts(queue.backend, [call])
    if isinstance(reply, Exception):
        raise reply
    return parse(reply)
