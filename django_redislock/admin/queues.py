"""The queue page (tasks of one state, keyset-paged) and the task detail page.

Pages move by ``(score, id)`` cursors (``?after=<score>&id=<id>`` or
``?before=...``), never by page number: a page number means counting past
every earlier task, and the position of page 20,000 of a million tasks moves
while workers pop from the front. Search is by exact id (one ``ZSCORE`` per
state inside one script).
"""

from __future__ import annotations

from contextlib import suppress
from typing import TYPE_CHECKING, Any

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect, JsonResponse
from django.utils.http import content_disposition_header, urlencode

from ..models import MANAGE_TASKS, PURGE_QUEUES
from ..queue.history import read as read_history
from ..queue.records import DEAD, DELAYED, IN_FLIGHT, READY, STATES
from .common import (
    REDIS_ERRORS,
    can,
    parse_int,
    queue_key,
    read,
    render,
    require,
    unquote,
    url,
    wants_live,
)
from .data import ACTIONS, TaskPage, task_page
from .flow import FLOW_ACTIONS
from .functions import function_context
from .groups import group_context
from .history import function_name
from .keytypes import explain
from .lookup import queue_exists, queue_of
from .rows import TaskRow
from .runs import runs_url
from .search import PrefixHits, find_prefix, find_task
from .trends import long_rows, outcome_rows
from .workflows import mark_id, workflow_url

if TYPE_CHECKING:
    from django.contrib.admin import ModelAdmin

#: What each state's time column means.
WHEN_LABELS = {READY: "Due", DELAYED: "Due", IN_FLIGHT: "Lease deadline", DEAD: "Died"}
STATE_LABELS = {READY: "Ready", DELAYED: "Delayed", IN_FLIGHT: "In flight", DEAD: "Dead"}
#: Payload bytes read for a search hit, shown in the preview column.
PREVIEW_CAP = 200


def decorate(queue: Any, row: TaskRow) -> TaskRow:
    """Add the row's links: its detail page and one per action its state allows."""
    alias, name = queue.backend.alias, queue.name
    row.urls["detail"] = url("task", alias, name, row.id)
    for action, states in ACTIONS.items():
        if row.state in states:
            row.urls[action] = url("task_action", alias, name, row.id, action)
    return row


def page_query(
    state: str, rows: list[TaskRow], page: TaskPage, cursor: tuple[int, str] | None
) -> dict[str, str]:
    """Links to the first, previous, next and last pages of ``state``.

    A cursor past the end (the tasks after it were taken meanwhile) gives an
    empty page that still links back: "Previous" ends just before the cursor.
    """
    links = {"first": urlencode({"state": state})}
    if page.has_previous and rows:
        links["previous"] = urlencode(
            {"state": state, "before": str(rows[0].score), "id": rows[0].id}
        )
    elif not rows and cursor is not None and page.total:
        links["previous"] = urlencode({"state": state, "before": str(cursor[0]), "id": cursor[1]})
    if page.has_next and rows:
        links["next"] = urlencode({"state": state, "after": str(rows[-1].score), "id": rows[-1].id})
        links["last"] = urlencode({"state": state, "last": "1"})
    return links


def requested_page(request: HttpRequest) -> tuple[str, str, tuple[int, str] | None]:
    """``(state, direction, cursor)`` from the query string; junk falls back to page one."""
    state = request.GET.get("state", READY)
    if state not in STATES:
        state = READY
    if request.GET.get("last"):
        return state, "last", None
    for direction in ("after", "before"):
        score = parse_int(request.GET.get(direction))
        if score is not None and "id" in request.GET:
            return state, direction, (score, request.GET["id"])
    return state, "first", None


def queue_page(
    model_admin: ModelAdmin[Any], request: HttpRequest, alias: str, name: str
) -> HttpResponse:
    """Tasks of one state of one queue, 50 a page, with search by exact id or id prefix."""
    require(request)
    queue = queue_of(alias, name)
    state, direction, cursor = requested_page(request)
    search = request.GET.get("q", "").strip()
    by_prefix = bool(search) and request.GET.get("match") == "prefix"
    rows: list[TaskRow] = []
    page, links, error, more_url = None, {}, "", ""
    try:

        def load() -> tuple[list[TaskRow] | PrefixHits, TaskPage, bool]:
            if by_prefix:
                found: list[TaskRow] | PrefixHits = find_prefix(
                    queue, search, request.GET.get("from", "")
                )
            else:
                hit = find_task(queue, search, cap=PREVIEW_CAP) if search else None
                found = [hit] if hit else []
            got = task_page(queue, state, direction, cursor)
            exists = bool(sum(got.counts.values())) or queue_exists(queue)
            return found, got, exists

        found, page, exists = read(load, key=queue_key(queue.backend.alias))
        if not exists:
            raise Http404(f"No queue “{queue.name}” on alias “{queue.backend.alias}”")
        if isinstance(found, PrefixHits):
            rows = [decorate(queue, row) for row in found.rows]
            if found.cursor:
                query = {"state": state, "q": search, "match": "prefix", "from": found.cursor}
                more_url = url("queue", queue.backend.alias, queue.name, query=urlencode(query))
            elif not rows:
                messages.warning(request, f"No task id starts with “{search}” in this queue.")
        elif search:
            rows = [decorate(queue, row) for row in found]
            if not found:
                messages.warning(request, f"No task with the id “{search}” in this queue.")
        else:
            rows = [decorate(queue, row) for row in page.rows]
            links = {
                k: url("queue", queue.backend.alias, queue.name, query=v)
                for k, v in page_query(state, rows, page, cursor).items()
            }
    except REDIS_ERRORS as exc:
        error = str(exc)
        if "WRONGTYPE" in error:  # name the key (one more read, only on this error)
            with suppress(*REDIS_ERRORS):
                error = read(lambda: explain(queue, error), key=queue_key(queue.backend.alias))
    counts = page.counts if page else {}
    tabs = [
        (
            s,
            STATE_LABELS[s],
            counts.get(s),
            url("queue", queue.backend.alias, queue.name, query=urlencode({"state": s})),
        )
        for s in STATES
    ]
    return render(
        model_admin,
        request,
        "queue.html",
        f"Queue “{queue.name}”",
        crumbs=[(f"Queue {queue.name} ({queue.backend.alias})", "")],
        live=None
        if search or error
        else {
            "state-tabs": "_queue_tabs.html",
            "task-rows": "_queue_rows.html",
            "keyset": "_queue_pager.html",
            "queue-trends": "_queue_trends.html",
        },
        queue=queue,
        alias=queue.backend.alias,
        state=state,
        state_label=STATE_LABELS[state],
        when_label=WHEN_LABELS[state],
        tabs=tabs,
        rows=rows,
        page=page,
        links=links,
        search=search,
        by_prefix=by_prefix,
        more_url=more_url,
        error=error,
        actions_url=url("bulk", queue.backend.alias, queue.name),
        requeue_dead_url=url("requeue_dead", queue.backend.alias, queue.name),
        return_expired_url=url("return_expired", queue.backend.alias, queue.name),
        purge_url=url("purge", queue.backend.alias, queue.name),
        flow=page.flow if page else None,  # read with the page, in its one round trip
        flow_urls={a: url("flow", queue.backend.alias, queue.name, a) for a in FLOW_ACTIONS},
        may_manage=can(request, MANAGE_TASKS),
        may_purge=can(request, PURGE_QUEUES),
        actions=[a for a, states in ACTIONS.items() if state in states],
        runs_url=url("runs", queue.backend.alias, queue.name),
        **trend_context(page.trend if page else None, queue),
        **function_context(page.functions if page else None, queue),
        **group_context(page.groups if page else None),
        **long_context(page.long_trend if page else None),
    )


def task_detail(
    model_admin: ModelAdmin[Any], request: HttpRequest, alias: str, name: str, task_id: str
) -> HttpResponse:
    """One task with its pretty-printed payload and the actions its state allows."""
    require(request)
    queue = queue_of(alias, name)
    task_id = unquote(task_id)
    back = url("queue", queue.backend.alias, queue.name)
    try:
        task = read(
            lambda: find_task(queue, task_id, history=True), key=queue_key(queue.backend.alias)
        )
    except REDIS_ERRORS as exc:
        if wants_live(request):  # the live script keeps the fields, marks them stale, retries
            return JsonResponse({"error": str(exc)}, status=503)
        messages.error(request, f"Could not read task “{task_id}”: {exc}")
        return HttpResponseRedirect(back)
    if task is None:
        if wants_live(request):  # the live script stops and offers a reload
            return JsonResponse({"gone": f"Task “{task_id}” is not in the queue any more."})
        gone = gone_task(model_admin, request, queue, task_id, back)
        if gone is not None:
            return gone
        messages.warning(request, f"Task “{task_id}” is not in queue “{queue.name}” any more.")
        return HttpResponseRedirect(back)
    decorate(queue, task)
    return render(
        model_admin,
        request,
        "task.html",
        f"Task “{task.id}”",
        crumbs=[(f"Queue {queue.name} ({queue.backend.alias})", back), (task.id, "")],
        live={"task-fields": "_task_fields.html", "task-history": "_task_history.html"},
        task=task,
        queue=queue,
        state_label=STATE_LABELS[task.state],
        when_label=WHEN_LABELS[task.state],
        may_manage=can(request, MANAGE_TASKS),
        download_url=url("payload", queue.backend.alias, queue.name, task.id),
        function=function_name(task.payload),
        workflow_url=workflow_link(queue, task),
        last_run=task.runs[-1] if task.runs else None,
    )


def workflow_link(queue: Any, task: TaskRow) -> str:
    """The page of the workflow the task belongs to ("" for other tasks, and for a payload
    that is pickled or cut short: never deserialized here)."""
    if queue.backend.options["SERIALIZER"] == "pickle" or task.truncated:
        return ""
    found = mark_id(task.payload)
    return workflow_url(queue, found) if found else ""


def task_payload(
    model_admin: ModelAdmin[Any], request: HttpRequest, alias: str, name: str, task_id: str
) -> HttpResponse:
    """The whole stored payload of a task, as a download (never rendered, never deserialized)."""
    require(request)
    queue = queue_of(alias, name)
    task_id = unquote(task_id)
    try:
        task = read(lambda: find_task(queue, task_id, cap=0), key=queue_key(queue.backend.alias))
    except REDIS_ERRORS as exc:
        messages.error(request, f"Could not read task “{task_id}”: {exc}")
        return HttpResponseRedirect(url("queue", queue.backend.alias, queue.name))
    if task is None:
        raise Http404(f"Task “{task_id}” is not in queue “{queue.name}” any more.")
    pickled = queue.backend.options["SERIALIZER"] == "pickle"
    response = HttpResponse(
        task.raw, content_type="application/octet-stream" if pickled else "application/json"
    )
    suffix = "pickle" if pickled else "json"
    response["Content-Disposition"] = content_disposition_header(
        as_attachment=True, filename=f"task-{task.id}.{suffix}"
    )
    return response


def trend_context(trend: Any, queue: Any = None) -> dict[str, Any]:
    """The queue page's charts (or why they are missing), each failure type linking to its runs."""
    if trend is None:
        return {"trend": None, "trend_rows": [], "trend_error": "", "failure_types": []}
    if isinstance(trend, Exception):
        return {"trend": None, "trend_rows": [], "trend_error": str(trend), "failure_types": []}
    types = [
        (name, n, runs_url(queue.backend.alias, queue.name, error=name) if queue else "")
        for name, n in trend.types
    ]
    return {
        "trend": trend,
        "trend_rows": outcome_rows(trend),
        "trend_error": "",
        "failure_types": types,
    }


def gone_task(
    model_admin: ModelAdmin[Any], request: HttpRequest, queue: Any, task_id: str, back: str
) -> HttpResponse | None:
    """The recorded runs of a task that left the queue (finished, removed), or None if none."""
    try:
        runs = read(lambda: read_history(queue, task_id), key=queue_key(queue.backend.alias))
    except REDIS_ERRORS:
        return None
    if not runs:
        return None
    return render(
        model_admin,
        request,
        "task_gone.html",
        f"Task “{task_id}”",
        crumbs=[(f"Queue {queue.name} ({queue.backend.alias})", back), (task_id, "")],
        task_id=task_id,
        queue=queue,
        task={"runs": runs},
        back=back,
    )


def long_context(trend: Any) -> dict[str, Any]:
    """The queue page's day and week charts (or why they are missing)."""
    if trend is None:
        return {"long_rows": [], "long_error": ""}
    if isinstance(trend, Exception):
        return {"long_rows": [], "long_error": str(trend)}
    return {"long_rows": long_rows(trend), "long_error": ""}
