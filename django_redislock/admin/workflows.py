"""A workflow (chain, group, chord, a task with dependencies) as one object: its page and
its "Cancel workflow" action (issue 29, item 6).

The page reads the workflow's hash (see :mod:`django_redislock.queue.workflows`) with one
pipeline of two ``HMGET``: its header fields and a page of :data:`PAGE` members (their
task id, end, result, error), and the queue's dependency hash fields of this workflow. A
member's result is shown as stored text (a pickle as its bytes' repr), never deserialized.

The cancel (POST, CSRF, ``manage_tasks``, a ``LogEntry``) first ends the workflow in one
script (``admin_workflow_cancel.lua``: FAILED with the operator's reason, or CANCELLED while
it waits for its dependencies, so no later step or callback is queued and the workflows
waiting for it are cancelled), then cancels each member that did not end with
:meth:`Queue.cancel <django_redislock.queue.queue.Queue.cancel>` (a queued one is removed, a
running one's worker is asked to stop it), at most :data:`CANCEL_MAX` of them per POST and
within the request's budget; the page says how many are left for another press.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from django.contrib import messages
from django.contrib.admin.models import CHANGE
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect

from ..calls.script import script
from ..models import MANAGE_TASKS
from ..queue.workflows import MARK, workflow_keys
from ..wire import to_text
from .common import (
    REDIS_ERRORS,
    can,
    log,
    parse_int,
    queue_key,
    read,
    render,
    require,
    time_left,
    unquote,
    url,
)
from .lookup import queue_of
from .rows import payload_text, unescape_json

if TYPE_CHECKING:
    from django.contrib.admin import ModelAdmin

#: Members shown per page of a workflow.
PAGE = 100
#: Characters of a member's result or error shown.
SHOWN = 300
#: Members cancelled per "Cancel workflow" POST at most.
CANCEL_MAX = 500
#: The hash's header fields read by the page.
HEADER = ("kind", "state", "n", "left", "allow", "cb", "failed", "error", "result")
#: Workflow ids the page accepts (the canvas makes 32 hex digits; anything printable fits).
MAX_ID = 200


@dataclass
class Member:
    index: int
    id: str
    ended: str  # "ok", "failed" or "" (not ended: waiting, queued or running)
    result: str
    error: str
    url: str = ""
    role: str = ""


@dataclass
class Workflow:
    id: str
    exists: bool
    kind: str = ""
    state: str = ""
    count: int = 0
    left: int = 0
    allow: bool = False
    failed: str = ""
    error: str = ""
    result: str = ""
    deferred: bool = False
    cancelled: str = ""
    members: list[Member] = field(default_factory=list)
    more: bool = False


def clip(text: str) -> str:
    return text if len(text) <= SHOWN else text[:SHOWN] + "…"


def shown(raw: Any, serializer: str) -> str:
    """A stored result as text (a pickle as its bytes' repr: never loaded)."""
    return "" if raw is None else clip(unescape_json(payload_text(raw, serializer)))


def read_workflow(queue: Any, workflow_id: str, start: int = 0) -> Workflow:
    """The workflow's header and members ``start`` to ``start + PAGE - 1`` (one pipeline)."""
    hash_key, deps_key = workflow_keys(queue, workflow_id)
    indices = range(start, start + PAGE + 1)  # one more: is there a next page?
    fields = [*HEADER]
    for i in indices:
        fields += [f"m:{i}", f"s:{i}", f"r:{i}", f"e:{i}"]
    client = queue.backend.client
    with queue.backend.errors():
        pipe = client.pipeline(transaction=False)
        pipe.hmget(hash_key, fields)
        pipe.hmget(deps_key, [f"x:{workflow_id}", f"l:{workflow_id}"])
        values, deps = pipe.execute()
    head = dict(zip(HEADER, values[: len(HEADER)], strict=True))
    if head["state"] is None:
        return Workflow(workflow_id, exists=False, cancelled=to_text(deps[0] or ""))
    serializer = queue.backend.options["SERIALIZER"]
    kind = to_text(head["kind"] or "")
    count = parse_int(to_text(head["n"] or "0")) or 0
    flow = Workflow(
        workflow_id,
        exists=True,
        kind=kind,
        state=to_text(head["state"]),
        count=count,
        left=parse_int(to_text(head["left"] or "0")) or 0,
        allow=to_text(head["allow"] or "") == "1",
        failed=to_text(head["failed"] or ""),
        error=to_text(head["error"] or ""),
        result=shown(head["result"], serializer),
        deferred=deps[1] is not None,
        cancelled=to_text(deps[0] or ""),
    )
    rest = values[len(HEADER) :]
    callback = to_text(head["cb"] or "")
    for at, i in enumerate(indices):
        member_id, ended, result, error = rest[4 * at : 4 * at + 4]
        if member_id is None and kind == "chord" and i == count and callback:
            member_id = callback  # the callback's id is kept as cb, its end as s:<n>
        if member_id is None:
            break
        if i == start + PAGE:
            flow.more = True
            break
        flow.members.append(
            Member(
                index=i,
                id=to_text(member_id),
                ended=to_text(ended or ""),
                result=shown(result, serializer),
                error=clip(to_text(error)) if error is not None else "",
                url=url("task", queue.backend.alias, queue.name, to_text(member_id)),
                role=role_of(kind, i, count),
            )
        )
    return flow


def role_of(kind: str, index: int, count: int) -> str:
    if kind == "chain":
        return f"step {index + 1}"
    if kind == "chord" and index == count:
        return "callback"
    if kind in ("group", "chord"):
        return f"member {index + 1}"
    return "task"


def mark_id(payload_text: str) -> str:
    """The workflow id a task's (whole, JSON) payload text carries, or "".

    The admin never deserializes a pickle, and a payload cut short is not parsed: such a
    task's workflow is reached by its URL only.
    """
    try:
        payload = json.loads(payload_text)
    except (ValueError, RecursionError):
        return ""
    mark = payload.get(MARK) if isinstance(payload, dict) else None
    found = mark.get("id") if isinstance(mark, dict) else None
    return found if isinstance(found, str) and 0 < len(found) <= MAX_ID else ""


def workflow_url(queue: Any, workflow_id: str, query: str = "") -> str:
    return url("workflow", queue.backend.alias, queue.name, workflow_id, query=query)


def workflow_page(
    model_admin: ModelAdmin[Any], request: HttpRequest, alias: str, name: str, workflow_id: str
) -> HttpResponse:
    """The workflow ``workflow_id`` of the queue: kind, state, members, and its cancel."""
    require(request)
    queue = queue_of(alias, name)
    workflow_id = unquote(workflow_id)
    start = parse_int(request.GET.get("from", "0"), 0, 10**9) or 0
    back = url("queue", queue.backend.alias, queue.name)
    crumbs = [(f"Queue {queue.name} ({queue.backend.alias})", back), (workflow_id, "")]
    try:
        flow = read(
            lambda: read_workflow(queue, workflow_id, start), key=queue_key(queue.backend.alias)
        )
        error = ""
    except REDIS_ERRORS as exc:
        flow, error = Workflow(workflow_id, exists=False), str(exc)
    going = flow.exists and (flow.state == "RUNNING" or flow.deferred)
    return render(
        model_admin,
        request,
        "workflow.html",
        f"Workflow “{workflow_id}”",
        crumbs=crumbs,
        flow=flow,
        queue=queue,
        error=error,
        start=start,
        next_url=workflow_url(queue, workflow_id, f"from={start + PAGE}") if flow.more else "",
        previous_url=(
            workflow_url(queue, workflow_id, f"from={max(0, start - PAGE)}") if start else ""
        ),
        may_cancel=can(request, MANAGE_TASKS) and flow.exists,
        going=going,
        cancel_url=url("workflow_cancel", queue.backend.alias, queue.name, workflow_id),
    )


def workflow_cancel(
    model_admin: ModelAdmin[Any], request: HttpRequest, alias: str, name: str, workflow_id: str
) -> HttpResponse:
    """POST: end the workflow and cancel its members that did not end (GET: its page)."""
    require(request, MANAGE_TASKS)
    queue = queue_of(alias, name)
    workflow_id = unquote(workflow_id)
    page = workflow_url(queue, workflow_id)
    if request.method != "POST":
        return HttpResponseRedirect(page)
    reason = f"cancelled in the admin by {request.user.get_username()} (workflow {workflow_id})"
    try:
        reply = read(
            lambda: end_workflow(queue, workflow_id, reason), key=queue_key(queue.backend.alias)
        )
    except REDIS_ERRORS as exc:
        messages.error(request, f"Could not cancel workflow “{workflow_id}”: {exc}")
        return HttpResponseRedirect(page)
    outcome, members = int(reply[0]), [to_text(m) for m in reply[1:]]
    if outcome < 0:
        messages.warning(
            request, f"Workflow “{workflow_id}” is unknown (expired or never started)."
        )
        return HttpResponseRedirect(page)
    outcomes: dict[str, list[str]] = {"removed": [], "requested": [], "finished": []}
    error = ""
    for member in members[:CANCEL_MAX]:
        if time_left() <= 0:
            break
        try:
            outcomes[queue.cancel(member, reason)].append(member)
        except REDIS_ERRORS as exc:
            error = str(exc)
            break
    acted = sum(len(v) for v in outcomes.values())
    left = len(members) - acted
    what = (
        "ended it as failed (no later step or callback is queued)"
        if outcome
        else ("it had already ended")
    )
    log(
        request,
        CHANGE,
        [
            (
                f"workflow:{queue.backend.alias}:{queue.name}:{workflow_id}",
                f"workflow {workflow_id} ({queue.name})",
            )
        ],
        f"Cancel workflow of queue {queue.name!r} on alias {queue.backend.alias!r}: {what}; "
        f"{len(outcomes['removed'])} queued member(s) removed, {len(outcomes['requested'])} "
        f"running member(s) asked to stop.",
    )
    messages.success(
        request,
        f"Workflow “{workflow_id}”: {what}; {len(outcomes['removed'])} queued member(s) "
        f"removed, {len(outcomes['requested'])} running member(s) asked to stop.",
    )
    if error:
        messages.error(request, f"Cancelling its members stopped: {error}")
    if left > 0:
        messages.warning(
            request, f"{left} member(s) not cancelled yet: press “Cancel workflow” again."
        )
    return HttpResponseRedirect(page)


def end_workflow(queue: Any, workflow_id: str, reason: str) -> list[Any]:
    """The ``admin_workflow_cancel`` script: its outcome, then the members not ended."""
    with queue.backend.errors():
        reply: list[Any] = script("admin_workflow_cancel").run(
            queue.backend.client,
            workflow_keys(queue, workflow_id),
            [workflow_id, reason, CANCEL_MAX],
        )
    return reply
