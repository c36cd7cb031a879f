"""The audit trail (this app's ``LogEntry`` rows) and the links "Recent actions" follow.

Every dashboard action writes ``LogEntry`` rows on the ``Dashboard`` content
type with an object id naming what it touched (``lock:<alias>:<name>``,
``queue:<alias>:<name>``, ``task:<alias>:<queue>:<id>``, ``worker:<alias>:<id>``). The admin links a
log entry to ``<object id>/change/`` of the model's admin; that URL is
:func:`open_object` here, which sends the operator to the lock, queue or task.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib.admin.models import LogEntry
from django.contrib.contenttypes.models import ContentType
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.utils.http import urlencode

from ..handlers import queues
from ..models import Dashboard
from .common import REDIS_ERRORS, parse_int, queue_key, read, render, require, unquote, url
from .data import supports_scripts

if TYPE_CHECKING:
    from django.contrib.admin import ModelAdmin

#: Log entries per page of the audit trail.
AUDIT_PAGE_SIZE = 50


def object_url(object_id: str) -> str:
    """The dashboard page of a logged object, "" when its id is not one of ours.

    A task id is ``task:<alias>:<queue>:<id>`` and queue names may hold colons
    too, so the queue is the longest prefix the alias's queue list knows
    (one ``SMEMBERS``), else the text up to the next colon.
    """
    kind, _, rest = object_id.partition(":")
    alias, _, name = rest.partition(":")
    if not (alias and name):
        return ""
    if kind == "lock":
        return url("locks", query=urlencode({"alias": alias, "prefix": name}))
    if kind in ("semaphore", "fair"):
        return url("coordination", query=urlencode({"alias": alias}))
    if kind == "queue":
        return url("queue", alias, name)
    if kind == "worker":
        return url("workers", query=urlencode({"q": name}))
    if kind != "task":
        return ""
    known: set[str] = set()
    if alias in queues and supports_scripts(queues[alias]):
        try:
            known = set(read(queues[alias].queue_names, key=queue_key(alias)))
        except REDIS_ERRORS:
            known = set()
    splits = [(name[:i], name[i + 1 :]) for i, c in enumerate(name) if c == ":"]
    for queue, task in sorted(splits, key=lambda split: -len(split[0])):
        if queue in known:
            return url("task", alias, queue, task)
    if splits:
        queue, task = splits[0]
        return url("task", alias, queue, task)
    return ""


def open_object(model_admin: ModelAdmin[Any], request: HttpRequest, object_id: str) -> HttpResponse:
    """Where "Recent actions" and the audit trail link a log entry: the object's page."""
    require(request)
    target = object_url(unquote(object_id))
    if not target:
        raise Http404("not an object of the dashboard")
    return HttpResponseRedirect(target)


def audit_page(model_admin: ModelAdmin[Any], request: HttpRequest) -> HttpResponse:
    """Every action taken through the dashboard, newest first, 50 a page."""
    require(request)
    content_type = ContentType.objects.get_for_model(Dashboard)
    entries = LogEntry.objects.filter(content_type=content_type).select_related("user")
    user = request.GET.get("user", "")
    if user:
        entries = entries.filter(user__username=user)
    total = entries.count()
    pages = max(1, -(-total // AUDIT_PAGE_SIZE))
    number = parse_int(request.GET.get("page"), 1) or 1
    number = min(number, pages)
    start = (number - 1) * AUDIT_PAGE_SIZE
    rows = [
        {"entry": entry, "url": url("change", entry.object_id)}
        for entry in entries.order_by("-action_time", "-pk")[start : start + AUDIT_PAGE_SIZE]
    ]

    def link(page: int) -> str:
        query = {"page": str(page), **({"user": user} if user else {})}
        return url("audit", query=urlencode(query))

    return render(
        model_admin,
        request,
        "audit.html",
        "Audit trail",
        crumbs=[("Audit trail", "")],
        rows=rows,
        total=total,
        number=number,
        pages=pages,
        user_filter=user,
        previous_url=link(number - 1) if number > 1 else "",
        next_url=link(number + 1) if number < pages else "",
        first_row=start + 1,
        last_row=start + len(rows),
    )
