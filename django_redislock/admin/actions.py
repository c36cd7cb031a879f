"""Task actions: run now, requeue, delete (one task, a selection, or a whole state).

Each one checks its own permission, confirms on GET (bulk delete confirms on
a first POST, as the admin's own "delete selected" does), works on POST,
writes a ``LogEntry`` per object, says what happened with ``messages`` and
redirects. Task forms carry the score the operator saw; the action script
refuses tasks whose state or score has moved since. The actions on a whole
queue are in :mod:`.queue_actions`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib import messages
from django.contrib.admin.models import CHANGE, DELETION
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.utils.http import urlencode

from ..models import MANAGE_TASKS
from ..queue.records import STATES
from .common import (
    REDIS_ERRORS,
    decode_id,
    log,
    parse_int,
    queue_key,
    read,
    render,
    require,
    unquote,
    url,
)
from .data import ACTIONS, CHANGED, DONE, GONE, REQUESTED, act, task_page
from .lookup import queue_of
from .queues import STATE_LABELS
from .rows import WHERE
from .search import find_task

if TYPE_CHECKING:
    from django.contrib.admin import ModelAdmin

VERBS = {"run": "Run now", "requeue": "Requeue", "cancel": "Cancel", "delete": "Delete"}
DONE_VERBS = {
    "run": "made due now",
    "requeue": "requeued",
    "cancel": "cancelled (removed from the queue)",
    "delete": "deleted",
}
#: Tasks read and acted on per step of an action over a whole state.
BULK_PAGE = 500


def back_to(queue: Any, state: str) -> str:
    return url("queue", queue.backend.alias, queue.name, query=urlencode({"state": state}))


def reason_of(request: HttpRequest) -> str:
    """What a cancel from the admin records as its reason (who asked)."""
    return f"cancelled in the admin by {request.user.get_username()}"


def task_name(queue: Any, id: str) -> tuple[str, str]:
    """The ``LogEntry`` object id and name of a task."""
    return f"task:{queue.backend.alias}:{queue.name}:{id}", f"task {id} ({queue.name})"


def report(request: HttpRequest, queue: Any, action: str, ids: list[str], codes: list[int]) -> None:
    """Log the tasks that were done and tell the operator about every outcome."""
    done = [id for id, code in zip(ids, codes, strict=True) if code == DONE]
    asked = [id for id, code in zip(ids, codes, strict=True) if code == REQUESTED]
    if asked:  # cancel of a running task: its worker stops it at its next lease renewal
        log(
            request,
            CHANGE,
            [task_name(queue, id) for id in asked],
            f"Cancel: asked the worker running this task of queue {queue.name!r} on alias "
            f"{queue.backend.alias!r} to stop it.",
        )
        shown = ", ".join(f"“{id}”" for id in asked[:5]) + (" …" if len(asked) > 5 else "")
        messages.success(
            request,
            f"{len(asked)} running task(s) asked to stop (the worker ends the run as cancelled "
            f"at its next lease renewal): {shown}",
        )
    if done:
        log(
            request,
            DELETION if action == "delete" else CHANGE,
            [task_name(queue, id) for id in done],
            f"{VERBS[action]}: task of queue {queue.name!r} on alias {queue.backend.alias!r}.",
        )
        shown = ", ".join(f"“{id}”" for id in done[:5]) + (" …" if len(done) > 5 else "")
        messages.success(request, f"{len(done)} task(s) {DONE_VERBS[action]}: {shown}")
    outcomes = (
        (GONE, "not in the queue any more"),
        (CHANGED, "changed since you looked (left alone; reload and check)"),
    )
    for code, why in outcomes:
        hit = [id for id, c in zip(ids, codes, strict=True) if c == code]
        if hit:
            messages.warning(request, f"{len(hit)} task(s) {why}: " + ", ".join(hit[:5]))
    settled = (DONE, GONE, CHANGED, REQUESTED)
    skipped = [id for id, c in zip(ids, codes, strict=True) if c not in settled]
    if skipped:
        messages.warning(request, f"{VERBS[action]} does not apply to: " + ", ".join(skipped[:5]))


def task_action(
    model_admin: ModelAdmin[Any],
    request: HttpRequest,
    *,
    alias: str,
    name: str,
    task_id: str,
    action: str,
) -> HttpResponse:
    """Run now / requeue / delete one task: a confirmation page on GET, the work on POST."""
    require(request, MANAGE_TASKS)
    if action not in ACTIONS:
        raise Http404(f"no task action {action!r}")
    queue = queue_of(alias, name)
    task_id = unquote(task_id)
    try:
        task = read(lambda: find_task(queue, task_id), key=queue_key(queue.backend.alias))
        if task is None:
            messages.warning(request, f"Task “{task_id}” is not in queue “{queue.name}” any more.")
            return HttpResponseRedirect(back_to(queue, request.GET.get("state", "ready")))
        if request.method != "POST":
            return render(
                model_admin,
                request,
                "task_confirm.html",
                f"{VERBS[action]}: task “{task.id}”",
                crumbs=[
                    (f"Queue {queue.name} ({queue.backend.alias})", back_to(queue, task.state)),
                    (task.id, url("task", queue.backend.alias, queue.name, task.id)),
                    (VERBS[action], ""),
                ],
                task=task,
                state_label=STATE_LABELS[task.state],
                action=action,
                verb=VERBS[action],
                applies=task.state in ACTIONS[action],
                back_url=url("task", queue.backend.alias, queue.name, task.id),
            )
        where = parse_int(request.POST.get("where"), 1, 3)
        score = parse_int(request.POST.get("score"))
        if where is None or score is None:
            messages.error(request, "The form was incomplete or altered; nothing was done.")
            return HttpResponseRedirect(back_to(queue, task.state))
        codes = act(queue, action, [(task_id, where, score)], reason_of(request))
    except REDIS_ERRORS as exc:
        messages.error(request, f"Could not {VERBS[action].lower()} task “{task_id}”: {exc}")
        return HttpResponseRedirect(back_to(queue, "ready"))
    report(request, queue, action, [task_id], codes)
    return HttpResponseRedirect(back_to(queue, task.state))


def parse_selected(values: list[str]) -> list[tuple[int, str]]:
    """``score:id`` checkbox values (id %-escaped) as ``(score, id)``; malformed ones dropped."""
    picked = []
    for value in values:
        raw_score, sep, raw_id = value.partition(":")
        score = parse_int(raw_score)
        if sep and raw_id and score is not None:
            picked.append((score, decode_id(raw_id)))
    return picked


def bulk(model_admin: ModelAdmin[Any], request: HttpRequest, alias: str, name: str) -> HttpResponse:
    """The queue page's "action on selected tasks" form (POST only)."""
    require(request, MANAGE_TASKS)
    queue = queue_of(alias, name)
    state = request.POST.get("state", "")
    action = request.POST.get("action", "")
    if request.method != "POST" or state not in STATES:
        return HttpResponseRedirect(back_to(queue, "ready"))
    if request.POST.get("scope") == "all":
        return bulk_all(model_admin, request, queue, state, action)
    picked = parse_selected(request.POST.getlist("selected"))
    if action not in ACTIONS or state not in ACTIONS[action] or not picked:
        messages.warning(request, "Pick an action that applies to this state and some tasks.")
        return HttpResponseRedirect(back_to(queue, state))
    if action == "delete" and request.POST.get("confirm") != "yes":
        return render(
            model_admin,
            request,
            "bulk_confirm.html",
            f"Delete {len(picked)} task(s)",
            crumbs=[(f"Queue {queue.name} ({queue.backend.alias})", back_to(queue, state))],
            picked=picked,
            values=request.POST.getlist("selected"),
            state=state,
            state_label=STATE_LABELS[state],
            action=action,
            queue=queue,
            back_url=back_to(queue, state),
        )
    try:
        seen = [(id, WHERE[state], score) for score, id in picked]
        codes = act(queue, action, seen, reason_of(request))
    except REDIS_ERRORS as exc:
        messages.error(request, f"Could not {VERBS[action].lower()} the tasks: {exc}")
        return HttpResponseRedirect(back_to(queue, state))
    report(request, queue, action, [id for _, id in picked], codes)
    return HttpResponseRedirect(back_to(queue, state))


def bulk_all(
    model_admin: ModelAdmin[Any], request: HttpRequest, queue: Any, state: str, action: str
) -> HttpResponse:
    """An action on every task of a state, not only the visible page; confirmed with the count.

    Tasks are read a page of :data:`BULK_PAGE` at a time in the state's order
    and acted on with the score each was read with, so a task that moved
    meanwhile is left alone, as with a selection. At most the confirmed count
    is acted on: tasks arriving during the run may be among them in place of
    ones that left. One log entry records the whole run (a row per task would
    be a row per task of a 100,000-task state).
    """
    back = back_to(queue, state)
    if action not in ACTIONS or state not in ACTIONS[action]:
        messages.warning(request, "Pick an action that applies to this state.")
        return HttpResponseRedirect(back)
    try:
        total = read(
            lambda: task_page(queue, state, size=0), key=queue_key(queue.backend.alias)
        ).total
        if request.POST.get("confirm") != "yes":
            return render(
                model_admin,
                request,
                "bulk_confirm.html",
                f"{VERBS[action]}: all {total:,} {STATE_LABELS[state].lower()} task(s)",
                crumbs=[(f"Queue {queue.name} ({queue.backend.alias})", back)],
                whole_state=True,
                count=total,
                verb=VERBS[action],
                state=state,
                state_label=STATE_LABELS[state],
                action=action,
                queue=queue,
                back_url=back,
            )
        seen = parse_int(request.POST.get("count"), 0)
        if seen is None:
            messages.error(request, "The form was incomplete or altered; nothing was done.")
            return HttpResponseRedirect(back)
        done, skipped = act_on_state(queue, state, action, seen, reason_of(request))
    except REDIS_ERRORS as exc:
        messages.error(request, f"Could not {VERBS[action].lower()} the tasks: {exc}")
        return HttpResponseRedirect(back)
    if done:
        log(
            request,
            DELETION if action == "delete" else CHANGE,
            [(f"queue:{queue.backend.alias}:{queue.name}", f"queue {queue.name}")],
            f"{VERBS[action]}: all {state} tasks of queue {queue.name!r} on alias "
            f"{queue.backend.alias!r}: {done} task(s) {DONE_VERBS[action]} "
            f"(of {seen} confirmed).",
        )
        messages.success(request, f"{done:,} task(s) {DONE_VERBS[action]}.")
    if skipped:
        messages.warning(request, f"{skipped:,} task(s) changed meanwhile and were left alone.")
    if not done and not skipped:
        messages.warning(request, "No task was left to act on.")
    return HttpResponseRedirect(back)


def act_on_state(
    queue: Any, state: str, action: str, seen: int, reason: str = "cancelled"
) -> tuple[int, int]:
    """Apply ``action`` to up to ``seen`` tasks of ``state``, a page at a time: (done, skipped).

    A cancel asked of a running task counts as done."""
    done = skipped = 0
    cursor: tuple[int, str] | None = None
    for _ in range(seen // BULK_PAGE + 2):
        left = seen - done - skipped
        if left <= 0:
            break
        size = min(BULK_PAGE, left)
        page = task_page(queue, state, "after" if cursor else "first", cursor, size=size)
        if not page.rows:
            break
        rows = [(row.id, WHERE[state], row.score) for row in page.rows]
        codes = act(queue, action, rows, reason)
        done += sum(1 for code in codes if code in (DONE, REQUESTED))
        skipped += sum(1 for code in codes if code not in (DONE, REQUESTED))
        cursor = (page.rows[-1].score, page.rows[-1].id)
    return done, skipped
