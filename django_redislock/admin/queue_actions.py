"""Queue actions: requeue all dead tasks, purge, return expired leases.

Each one checks its own permission, confirms on GET with the count it will act
on, works on POST, writes a ``LogEntry`` for the queue, says what happened with
``messages`` and redirects. The form carries the confirmed count, and no action
goes past it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib import messages
from django.contrib.admin.models import CHANGE, DELETION
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect

from ..models import MANAGE_TASKS, PURGE_QUEUES
from ..queue.records import DEAD, IN_FLIGHT
from .actions import back_to
from .common import REDIS_ERRORS, log, parse_int, queue_key, read, render, require
from .data import purge_confirmed
from .lookup import queue_exists, queue_of
from .summaries import queue_summaries

if TYPE_CHECKING:
    from django.contrib.admin import ModelAdmin

#: Dead tasks moved per script call by "requeue all dead" (Redis stays responsive).
REQUEUE_CHUNK = 1000


def summary_of(queue: Any) -> Any:
    """The queue's summary (under the page deadline); 404 when there is no such queue.

    A queue exists when it holds tasks or the alias's queue list names it.
    """

    def load() -> tuple[Any, bool]:
        (found,) = queue_summaries(queue.backend, [queue.name])
        return found, found.total > 0 or queue_exists(queue)

    summary, exists = read(load, key=queue_key(queue.backend.alias))
    if not exists:
        raise Http404(f"No queue “{queue.name}” on alias “{queue.backend.alias}”")
    return summary


def queue_action(
    model_admin: ModelAdmin[Any],
    request: HttpRequest,
    alias: str,
    name: str,
    *,
    purge: bool,
) -> HttpResponse:
    """Requeue every dead task, or purge the whole queue; confirmed on GET with the count.

    The form carries the count the operator confirmed: a purge deletes at most
    that many tasks and nothing when more have arrived since (see
    :func:`~.data.purge_confirmed`); requeue moves at most that many.
    """
    require(request, PURGE_QUEUES if purge else MANAGE_TASKS)
    queue = queue_of(alias, name)
    back = back_to(queue, DEAD if not purge else "ready")
    verb = "Purge" if purge else "Requeue all dead tasks of"
    try:
        summary = summary_of(queue)
        if summary.error:
            messages.error(request, f"Queue “{queue.name}” cannot be read: {summary.error}")
            return HttpResponseRedirect(back)
        # a purge also deletes the tasks concurrency groups hold (not in the summary's counts)
        count = summary.total + summary.held if purge else summary.dead
        if request.method != "POST":
            return render(
                model_admin,
                request,
                "queue_confirm.html",
                f"{verb} queue “{queue.name}”",
                crumbs=[(f"Queue {queue.name} ({queue.backend.alias})", back), (verb, "")],
                queue=queue,
                summary=summary,
                count=count,
                purge=purge,
                back_url=back,
            )
        seen = parse_int(request.POST.get("count"), 0)
        if seen is None:
            messages.error(request, "The form was incomplete or altered; nothing was done.")
            return HttpResponseRedirect(back)
        grew = False
        if purge:
            done, grew = purge_confirmed(queue, seen)
        else:
            done = requeue_all_dead(queue, seen)
    except REDIS_ERRORS as exc:
        messages.error(request, f"{verb} queue “{queue.name}” failed: {exc}")
        return HttpResponseRedirect(back)
    if grew:
        messages.warning(
            request,
            f"Queue “{queue.name}” holds more tasks than the {seen:,} you confirmed; "
            f"{done:,} deleted before that was seen, the rest left alone. Check the queue and "
            f"purge again if you still mean it.",
        )
        if not done:
            return HttpResponseRedirect(back)
    what = "deleted" if purge else "requeued"
    if not done:  # nothing happened: said, not logged as an action that did something
        left = "to delete" if purge else "dead to requeue"
        messages.warning(request, f"Queue “{queue.name}” had no task {left}; nothing changed.")
        return HttpResponseRedirect(back)
    log(
        request,
        DELETION if purge else CHANGE,
        [(f"queue:{queue.backend.alias}:{queue.name}", f"queue {queue.name}")],
        f"{verb} queue {queue.name!r} on alias {queue.backend.alias!r}: {done} task(s) {what}.",
    )
    messages.success(request, f"Queue “{queue.name}”: {done} task(s) {what}.")
    return HttpResponseRedirect(back)


def requeue_all_dead(queue: Any, seen: int) -> int:
    """Requeue at most ``seen`` dead tasks (the count on the form), a chunk per call."""
    moved = 0
    while moved < seen:
        want = min(REQUEUE_CHUNK, seen - moved)
        step: int = queue.requeue_dead(limit=want)
        moved += step
        if step < want:
            break
    return moved


def return_expired(
    model_admin: ModelAdmin[Any], request: HttpRequest, alias: str, name: str
) -> HttpResponse:
    """Hand in-flight tasks whose lease ended back to the ready set, as the next claim would.

    It runs the queue's own claim script with a claim of zero tasks, whose first
    step recovers expired leases (``RECOVERY_BATCH`` per call): a task that has
    used up ``MAX_ATTEMPTS`` goes to the dead-letter set, the others become
    ready at once with "lease expired" as their last error. A worker still
    running such a task finds its ack refused ("lost"). Leases that end
    between the confirmation and the click are returned too: they are expired
    as well, and the next claim would return them anyway.
    """
    require(request, MANAGE_TASKS)
    queue = queue_of(alias, name)
    back = back_to(queue, IN_FLIGHT)
    try:
        summary = summary_of(queue)
        if summary.error:
            messages.error(request, f"Queue “{queue.name}” cannot be read: {summary.error}")
            return HttpResponseRedirect(back)
        if request.method != "POST":
            return render(
                model_admin,
                request,
                "queue_confirm.html",
                f"Return expired leases of queue “{queue.name}”",
                crumbs=[(f"Queue {queue.name} ({queue.backend.alias})", back), ("Return", "")],
                queue=queue,
                summary=summary,
                count=summary.expired_leases,
                mode="expired",
                back_url=back,
            )
        seen = parse_int(request.POST.get("count"), 0)
        if seen is None:
            messages.error(request, "The form was incomplete or altered; nothing was done.")
            return HttpResponseRedirect(back)
        batch = int(queue.backend.options["RECOVERY_BATCH"])
        returned = 0
        for _ in range(seen // batch + 2):
            step = int(queue.claim(0).recovered)
            returned += step
            if step < batch:
                break
    except REDIS_ERRORS as exc:
        messages.error(request, f"Returning expired leases of “{queue.name}” failed: {exc}")
        return HttpResponseRedirect(back)
    if returned:
        log(
            request,
            CHANGE,
            [(f"queue:{queue.backend.alias}:{queue.name}", f"queue {queue.name}")],
            f"Returned expired leases of queue {queue.name!r} on alias {queue.backend.alias!r}: "
            f"{returned} task(s) (ready, or dead when out of attempts).",
        )
        messages.success(
            request, f"Queue “{queue.name}”: {returned} task(s) with an expired lease returned."
        )
    else:
        messages.warning(request, f"Queue “{queue.name}” has no expired lease any more.")
    return HttpResponseRedirect(back)
