"""Recent runs of a queue: every finished run, newest first, searched and paged.

It reads the queue's run log (:mod:`django_redislock.queue.runlog`), which the
worker and the scripts that end a run write with no round trip of their own:
every success, failure and retry, dead letter, cancel and expiry, at most 1,000
successes and 1,000 other ends per queue, kept a week. One read-only script walks
both lists by end time, applies the filters (function, exception type, worker,
outcome, time) and returns one page of :data:`RUNS_PAGE` runs, with the counts.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from datetime import timezone as dt_timezone
from typing import TYPE_CHECKING, Any

from django.http import Http404, HttpRequest, HttpResponse
from django.utils.http import urlencode

from ..queue import runlog
from .common import (
    REDIS_ERRORS,
    duration,
    parse_int,
    queue_key,
    read,
    render,
    require,
    runtime,
    url,
)
from .lookup import queue_exists, queue_of

if TYPE_CHECKING:
    from django.contrib.admin import ModelAdmin

#: Rows per page.
RUNS_PAGE = 50
#: Ages the list may be limited to (``?within=``), in minutes.
WITHIN = {"15": 15, "60": 60, "1440": 1440}
#: Outcomes a run may have (``?outcome=``).
OUTCOMES = ("succeeded", "failed", "retried", "dead", "cancelled", "expired")


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

    def search(self) -> runlog.Search:
        """What the read script filters by."""
        return runlog.Search(
            function=self.function,
            error_type=self.error,
            worker=self.worker,
            outcome=self.outcome,
            since=parse_moment(self.since),
            until=parse_moment(self.until),
            within=WITHIN[self.within] * 60 if self.within else None,
        )

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
    """The queue's finished runs, newest first, 50 a page, with filters."""
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

        def load(skip: int) -> tuple[runlog.Page, bool]:
            page = runlog.read(queue, chosen.search(), skip, RUNS_PAGE)
            return page, bool(page.kept) or queue_exists(queue)

        page, exists = read(
            lambda: load((number - 1) * RUNS_PAGE), key=queue_key(queue.backend.alias)
        )
        if not exists:
            raise Http404(f"No queue “{queue.name}” on alias “{queue.backend.alias}”")
        total, kept = page.kept, page.matched
        pages = max(1, -(-kept // RUNS_PAGE))
        if number > pages:  # a page past the end (the log moved on): the last one
            number = pages
            page, _ = read(
                lambda: load((number - 1) * RUNS_PAGE), key=queue_key(queue.backend.alias)
            )
        for run in page.runs:
            rows.append(
                {
                    "row": run,
                    "url": url("task", queue.backend.alias, queue.name, run.id),
                    "ago": duration(max(0.0, (page.now - run.ended).total_seconds())),
                    "runtime": runtime(run.runtime) if run.runtime is not None else "",
                    "type_url": runs_url(alias, name, error=run.error_type)
                    if run.error_type
                    else "",
                    "function_url": runs_url(alias, name, function=run.function)
                    if run.function
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
