"""Pause and resume a queue from its page: confirm on GET, act on POST, audit, redirect.

Pausing is reversible and loses nothing (tasks keep arriving; running ones
finish), so it needs ``manage_tasks``, the permission of the other task actions,
not ``purge_queues``. The queue page and the overview read the flag with the
counts they already fetch (see :func:`flow_of` and the ``queue_summary``
script).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib import messages
from django.contrib.admin.models import CHANGE
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.utils.http import urlencode

from ..models import MANAGE_TASKS
from .common import REDIS_ERRORS, log, queue_key, read, render, require, url
from .lookup import queue_exists, queue_of

if TYPE_CHECKING:
    from django.contrib.admin import ModelAdmin

#: The two actions: (verb shown, past tense, Queue method).
FLOW_ACTIONS = {"pause": ("Pause", "paused", "pause"), "resume": ("Resume", "resumed", "resume")}


def flow_of(queue: Any) -> dict[str, Any] | None:
    """``{"paused": bool, "rate_limit": str | None}`` of a queue, or None if unreadable."""
    try:
        return read(queue.flow_state, key=queue_key(queue.backend.alias))  # type: ignore[no-any-return]
    except REDIS_ERRORS:
        return None  # the page shows the Redis error of its own reads


def flow_action(
    model_admin: ModelAdmin[Any], request: HttpRequest, *, alias: str, name: str, action: str
) -> HttpResponse:
    """Pause or resume queue ``name``: a confirmation page on GET, the change on POST."""
    require(request, MANAGE_TASKS)
    if action not in FLOW_ACTIONS:
        raise Http404(f"no queue action {action!r}")
    verb, done, method = FLOW_ACTIONS[action]
    queue = queue_of(alias, name)
    back = url("queue", queue.backend.alias, queue.name, query=urlencode({"state": "ready"}))
    try:
        if not read(lambda: queue_exists(queue), key=queue_key(queue.backend.alias)):
            raise Http404(f"No queue “{queue.name}” on alias “{queue.backend.alias}”")
        if request.method != "POST":
            return render(
                model_admin,
                request,
                "flow_confirm.html",
                f"{verb} queue “{queue.name}”",
                crumbs=[(f"Queue {queue.name} ({queue.backend.alias})", back), (verb, "")],
                queue=queue,
                action=action,
                verb=verb,
                flow=flow_of(queue),
                back_url=back,
            )
        state = read(queue.flow_state, key=queue_key(queue.backend.alias))
        if bool(state["paused"]) == (action == "pause"):
            # a no-op (another operator, another tab): said as such, not logged as done
            was = "paused" if action == "pause" else "not paused"
            messages.warning(request, f"Queue “{queue.name}” was already {was}; nothing changed.")
            return HttpResponseRedirect(back)
        read(getattr(queue, method), key=queue_key(queue.backend.alias))
    except REDIS_ERRORS as exc:
        messages.error(request, f"{verb} queue “{queue.name}” failed: {exc}")
        return HttpResponseRedirect(back)
    log(
        request,
        CHANGE,
        [(f"queue:{queue.backend.alias}:{queue.name}", f"queue {queue.name}")],
        f"{verb} queue {queue.name!r} on alias {queue.backend.alias!r}.",
    )
    messages.success(request, f"Queue “{queue.name}” {done}.")
    return HttpResponseRedirect(back)
