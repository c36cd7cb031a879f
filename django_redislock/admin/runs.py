"""Recent runs of a queue: the tasks with the latest recorded runs, filtered and paged.

It reads what task history (:mod:`django_redislock.queue.history`) already keeps,
with no write of its own: per queue, the last runs of the 1,000 tasks with the
most recent ones (a hash and an index, a week's TTL). The retry script records
every failed run, and the worker the success that ends a task that had failed,
so this list is the queue's recent failures, retries, dead letters and
recoveries; a task that succeeded at its first run has no history and is not
listed (recording every success would cost every run a write).

One read-only script returns each task's last run, its error cut to
:data:`ERROR_CHARS` characters from its start (type and message first); the
filters (exception type, worker, outcome, age) and the paging are applied here,
to at most :data:`~django_redislock.queue.history.TASKS` rows.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from datetime import timezone as dt_timezone
from typing import TYPE_CHECKING, Any

from django.http import Http404, HttpRequest, HttpResponse
from django.utils.http import urlencode

from ..locking.pipeline import run_scripts
from ..queue.history import TASKS, Run, parse
from ..wire import to_text
from .common import REDIS_ERRORS, duration, parse_int, queue_key, read, render, require, url
from .lookup import queue_exists, queue_of

if TYPE_CHECKING:
    from django.contrib.admin import ModelAdmin

#: Rows per page.
RUNS_PAGE = 50
#: Characters of each run's error the list shows (the task page shows the whole of it).
ERROR_CHARS = 300
#: Ages the list may be limited to (``?within=``), in minutes.
WITHIN = {"15": 15, "60": 60, "1440": 1440}
#: Outcomes a run may have (``?outcome=``).
OUTCOMES = ("failed", "retried", "dead", "succeeded")


@dataclass
class RecentRun:
    """A task and its last recorded run."""

    id: str
    run: Run
    runs: int

    @property
    def error_type(self) -> str:
        """The exception type of the run's error (its text up to the first colon), or ""."""
        head = self.run.error.split("\n", 1)[0]
        name, colon, _ = head.partition(":")
        return name.strip() if colon and " " not in name.strip() else ""


def read_recent(queue: Any, limit: int = TASKS) -> tuple[int, list[RecentRun]]:
    """(server time µs, each task's last run, newest first): one read-only script."""
    keys = [queue.history_key, queue.history_index_key]
    (reply,) = run_scripts(queue.backend, [("history_recent", keys, [limit, ERROR_CHARS])])
    if isinstance(reply, Exception):
        raise reply
    now, flat = int(reply[0]), reply[1:]
    found = []
    for i in range(0, len(flat) - 3, 4):
        runs = parse(json.dumps([json.loads(to_text(flat[i + 3]) or "{}")]))
        if runs:
            found.append(RecentRun(to_text(flat[i]), runs[0], int(flat[i + 2])))
    return now, found


def type_matches(run: RecentRun, wanted: str) -> bool:
    """``wanted`` is the run's exception type, qualified or not (``app.Boom`` matches ``Boom``)."""
    have = run.error_type
    if not have:
        return False
    return have == wanted or have.endswith("." + wanted) or wanted.endswith("." + have)


def parse_moment(text: str) -> datetime | None:
    """A UTC time from the filter (``2026-11-29T01:30``, seconds optional); None if not one."""
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    return moment.replace(tzinfo=dt_timezone.utc) if moment.tzinfo is None else moment


@dataclass
class RunFilter:
    function: str = ""
    error: str = ""
    worker: str = ""
    outcome: str = ""
    within: str = ""
    #: Ended at or after / before this UTC time (``YYYY-MM-DDTHH:MM``), "" for no bound.
    since: str = ""
    until: str = ""

    def keeps(self, row: RecentRun, now: datetime) -> bool:
        if self.function and self.function.casefold() not in row.run.function.casefold():
            return False
        if self.error and not type_matches(row, self.error):
            return False
        since, until = parse_moment(self.since), parse_moment(self.until)
        if since is not None and row.run.ended < since:
            return False
        if until is not None and row.run.ended >= until:
            return False
        if self.worker and self.worker.casefold() not in row.run.worker.casefold():
            return False
        if self.outcome and row.run.outcome != self.outcome:
            return False
        if self.within:
            return (now - row.run.ended).total_seconds() <= WITHIN[self.within] * 60
        return True

    def query(self, **extra: str) -> str:
        fields = {**self.__dict__, **extra}
        return urlencode({k: v for k, v in fields.items() if v})


def runs_url(alias: str, name: str, **filters: str) -> str:
    """The recent-runs page of a queue, with ``filters`` (function, error, worker, outcome,
    within, since, until)."""
    return url("runs", alias, name, query=RunFilter(**filters).query())


def runs_page(
    model_admin: ModelAdmin[Any], request: HttpRequest, alias: str, name: str
) -> HttpResponse:
    """The queue's tasks with recent recorded runs, newest first, 50 a page, with filters."""
    require(request)
    queue = queue_of(alias, name)
    moments = {
        bound: request.GET.get(bound, "").strip()[:32]
        for bound in ("since", "until")
        if parse_moment(request.GET.get(bound, "").strip()[:32]) is not None
    }
    chosen = RunFilter(
        function=request.GET.get("function", "").strip()[:200],
        error=request.GET.get("error", "").strip()[:200],
        worker=request.GET.get("worker", "").strip()[:200],
        outcome=request.GET.get("outcome", "") if request.GET.get("outcome") in OUTCOMES else "",
        within=request.GET.get("within", "") if request.GET.get("within") in WITHIN else "",
        **moments,
    )
    number = parse_int(request.GET.get("page"), 1, 10**6) or 1
    rows: list[dict[str, Any]] = []
    error, total, kept, pages = "", 0, 0, 1
    try:

        def load() -> tuple[int, list[RecentRun], bool]:
            now, found = read_recent(queue)
            return now, found, bool(found) or queue_exists(queue)

        now_us, found, exists = read(load, key=queue_key(queue.backend.alias))
        if not exists:
            raise Http404(f"No queue “{queue.name}” on alias “{queue.backend.alias}”")
        now = datetime.fromtimestamp(now_us / 1e6, dt_timezone.utc)
        total = len(found)
        picked = [row for row in found if chosen.keeps(row, now)]
        kept = len(picked)
        pages = max(1, -(-kept // RUNS_PAGE))
        number = min(number, pages)
        start = (number - 1) * RUNS_PAGE
        for row in picked[start : start + RUNS_PAGE]:
            rows.append(
                {
                    "row": row,
                    "url": url("task", queue.backend.alias, queue.name, row.id),
                    "ago": duration((now - row.run.ended).total_seconds()),
                    "runtime": duration(row.run.runtime) if row.run.runtime is not None else "",
                    "type_url": runs_url(alias, name, error=row.error_type)
                    if row.error_type
                    else "",
                    "function_url": runs_url(alias, name, function=row.run.function)
                    if row.run.function
                    else "",
                }
            )
    except REDIS_ERRORS as exc:
        error = str(exc)
    here = url("runs", queue.backend.alias, queue.name)
    return render(
        model_admin,
        request,
        "runs.html",
        f"Recent runs of queue “{queue.name}”",
        crumbs=[
            (f"Queue {queue.name} ({queue.backend.alias})", url("queue", alias, name)),
            ("Recent runs", ""),
        ],
        live=None if error else {"run-rows": "_runs_rows.html"},
        rows=rows,
        error=error,
        chosen=chosen,
        outcomes=OUTCOMES,
        within_choices=[("15", "15 min"), ("60", "1 hour"), ("1440", "1 day")],
        total=total,
        kept=kept,
        number=number,
        pages=pages,
        here=here,
        previous_url=f"{here}?{chosen.query(page=str(number - 1))}" if number > 1 else "",
        next_url=f"{here}?{chosen.query(page=str(number + 1))}" if number < pages else "",
    )
