"""What every dashboard page shares: permissions, rendering, URLs, the audit log, errors.

Each page is a plain function ``view(model_admin, request, ...)``; the
:class:`~django_redislock.admin.DashboardAdmin` routes to them through
``admin_site.admin_view``, which already requires an active staff user, and
each view then checks the one permission its action needs (a staff user who
may only look must not be able to release a lock by crafting a POST).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import quote as percent_quote
from urllib.parse import unquote as percent_unquote

import redis
from django.contrib.admin.models import LogEntry
from django.contrib.admin.utils import quote
from django.contrib.admin.utils import unquote as admin_unquote
from django.contrib.contenttypes.models import ContentType
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template.loader import render_to_string
from django.template.response import TemplateResponse
from django.urls import reverse

from ..exceptions import RedisLockError
from ..metrics.deadline import DeadlineExceeded, admin_timeout, all_within, within
from ..models import VIEW, Dashboard

if TYPE_CHECKING:
    from django.contrib.admin import ModelAdmin

#: What a Redis call may raise that a page reports instead of failing with a 500:
#: ``ConnectionFailed`` and ``InvalidArgument`` (our tree), and redis-py's own errors
#: that ``backend.errors()`` does not translate (a cluster that lost a slot, OOM, ...).
REDIS_ERRORS: tuple[type[Exception], ...] = (RedisLockError, redis.RedisError)
#: The prefix of the dashboard's URL names (``admin:<prefix>_<page>``).
URL_PREFIX = "admin:django_redislock_dashboard_"
#: Seconds between two polls of a live page's regions (paused while the tab is hidden).
LIVE_SECONDS = 5
#: Longest integer text accepted from a request (a microsecond score needs 17 digits).
MAX_DIGITS = 20

T = TypeVar("T")


def parse_int(raw: object, low: int | None = None, high: int | None = None) -> int | None:
    """The integer written in ``raw``, or None when it is anything else.

    Strict on purpose, for every number a page reads from a request: ASCII
    digits with at most one leading ``-`` and at most :data:`MAX_DIGITS` of
    them, within ``[low, high]`` when given. ``str.isdigit`` would accept
    ``²`` (which ``int`` refuses), ``lstrip("-")`` would accept ``--5``, and
    ``int`` refuses strings of more than 4,300 digits: each was a 500.
    """
    if not isinstance(raw, str):
        return None
    digits = raw[1:] if raw.startswith("-") else raw
    if not digits or len(digits) > MAX_DIGITS or not (digits.isascii() and digits.isdigit()):
        return None
    value = int(raw)
    if (low is not None and value < low) or (high is not None and value > high):
        return None
    return value


#: Seconds of a request's budget kept for rendering the page after its reads gave up (and,
#: for an action, its redirect): 0.2 s was too little on a loaded 2-core machine, where a
#: hung Redis cost the task page 2.04 s and the overview 2.12 s against a 2 s budget.
RENDER_MARGIN = 0.5
#: When the current request's Redis budget runs out (``time.monotonic()``), None outside one.
_request_end: ContextVar[float | None] = ContextVar("redislock_admin_request_end", default=None)


@contextmanager
def request_deadline() -> Iterator[None]:
    """One Redis budget, ``REDISLOCK_ADMIN_TIMEOUT`` seconds, for everything a request reads.

    Every dashboard view runs inside it (see ``styled_403``): a page that reads
    twice, or an action that reads and then renders, pays a hung Redis once,
    not once per read. The reads stop :data:`RENDER_MARGIN` before the budget
    ends (a quarter of it when that is less), so the page is rendered and sent
    within it.
    """
    budget = admin_timeout()
    token = _request_end.set(time.monotonic() + budget - min(RENDER_MARGIN, budget / 4))
    try:
        yield
    finally:
        _request_end.reset(token)


def time_left() -> float:
    """Seconds left of the request's budget (the whole deadline outside a request)."""
    end = _request_end.get()
    if end is None:
        return admin_timeout()
    return max(0.0, end - time.monotonic())


def hung_message() -> str:
    """What every page says when Redis does not answer within the budget."""
    return f"Redis did not answer within the {admin_timeout():g} s page deadline"


def read(fn: Callable[[], T], key: str | None = None) -> T:
    """``fn()`` (Redis calls of a page) within what is left of the request's budget.

    A Redis that does not answer then costs the request ``REDISLOCK_ADMIN_TIMEOUT``
    (2 s by default) once, not the socket timeout of every call; the page shows
    the error. ``key`` names the server (``admin-queues:<alias>``,
    ``admin-locks:<alias>``): while a read of that key abandoned by an earlier
    request is still waiting (a redirect after a failed read, the next live
    poll), this one fails at once with the same message instead of paying the
    deadline again.
    """
    left = time_left()
    if left <= 0:
        raise DeadlineExceeded(hung_message())
    try:
        return within(left, fn, key=key)
    except DeadlineExceeded as exc:
        raise DeadlineExceeded(hung_message()) from exc


def read_all(jobs: Mapping[str, Callable[[], Any]]) -> dict[str, Any]:
    """``jobs`` run in parallel within what is left of the request's budget (see :func:`read`).

    Each key maps to its result or the exception it ended with; a job that did not
    finish in time maps to a :class:`DeadlineExceeded` with :func:`hung_message`.
    """
    out = all_within(time_left(), jobs)
    return {
        key: DeadlineExceeded(hung_message()) if isinstance(value, DeadlineExceeded) else value
        for key, value in out.items()
    }


def queue_key(alias: str) -> str:
    """The :func:`read` key of a queue alias (shared with the overview's reads)."""
    return f"admin-queues:{alias}"


def lock_key(alias: str) -> str:
    """The :func:`read` key of a lock alias (shared with the overview's reads)."""
    return f"admin-locks:{alias}"


def encode_id(id: str) -> str:
    """A task id as a form value that survives posting: ``%``-escaped, so no newline is sent.

    Browsers turn a newline inside a form value into CR LF when they post it;
    an id with a newline would come back as a different id.
    """
    return percent_quote(id, safe="")


def decode_id(value: str) -> str:
    return percent_unquote(value)


def can(request: HttpRequest, codename: str) -> bool:
    """True when the user holds the dashboard permission ``codename``."""
    return bool(request.user.has_perm(f"django_redislock.{codename}"))


def require(request: HttpRequest, *codenames: str) -> None:
    """Raise ``PermissionDenied`` (a 403) unless the user may view and do ``codenames``."""
    for codename in (VIEW, *codenames):
        if not can(request, codename):
            raise PermissionDenied


def url(name: str, *args: str, query: str = "") -> str:
    """The URL of dashboard page ``name``; ``args`` (aliases, names, ids) are admin-quoted.

    ``quote`` escapes ``/`` and other specials the way the admin does for primary
    keys, so any lock name or task id fits one path segment, and ``reverse``
    percent-encodes what is left (spaces, quotes, unicode); see :func:`segment`.
    """
    path = reverse(URL_PREFIX + name, args=[segment(arg) for arg in args])
    return f"{path}?{query}" if query else path


def segment(arg: str) -> str:
    """``arg`` admin-quoted, with the dot segments ``.`` and ``..`` escaped too.

    Browsers and proxies collapse ``/./`` and ``/../`` in a path, so a queue or
    task called ``..`` would lead elsewhere. They become ``_2E`` and ``_2E_2E``,
    which :func:`unquote` reads back (a real ``_`` is always quoted as ``_5F``,
    so nothing else is written that way).
    """
    quoted = quote(arg)
    return DOT_SEGMENTS.get(quoted, quoted)


DOT_SEGMENTS = {".": "_2E", "..": "_2E_2E"}
UNDOTTED = {v: k for k, v in DOT_SEGMENTS.items()}


def unquote(text: str) -> str:
    """The alias, name or id written in a URL segment by :func:`segment`."""
    return UNDOTTED.get(text) or admin_unquote(text)


def wants_live(request: HttpRequest) -> bool:
    """True for the live script's poll of a page (``?live=1``)."""
    return request.GET.get("live") == "1"


def render(
    model_admin: ModelAdmin[Any],
    request: HttpRequest,
    template: str,
    title: str,
    crumbs: Sequence[tuple[str, str]] = (),
    *,
    live: Mapping[str, str] | None = None,
    **context: Any,
) -> HttpResponse:
    """Render ``admin/django_redislock/<template>`` inside the admin's own layout.

    ``crumbs`` are ``(label, url)`` pairs after Home and the app; the last
    one may have an empty URL (the current page). ``live`` maps the ids of the
    page's elements that refresh in place to the templates of their contents:
    the page then carries the live script, which polls the same URL with
    ``?live=1`` and gets ``{"regions": {id: html}}`` from here, rendered from
    the same context, so a region always shows what a reload would show. A
    poll of a page whose read failed (``error`` in the context) gets
    ``{"error": ...}`` with status 503 instead of emptied tables: the script
    keeps the last tables, marks them stale and retries.
    """
    opts = model_admin.model._meta
    page = {
        **model_admin.admin_site.each_context(request),
        "opts": opts,
        "app_label": opts.app_label,
        "title": title,
        "crumbs": crumbs,
        "dashboard_url": url("changelist"),
        "live_regions": list(live or ()),
        "live_seconds": LIVE_SECONDS,
        **context,
    }
    request.current_app = model_admin.admin_site.name
    if wants_live(request):
        error = str(context.get("error") or "")
        if error or not live:
            # a failed read: the script keeps what it shows, marks it stale and retries
            why = error or "this page shows no live tables now"
            return JsonResponse({"error": why, "interval": LIVE_SECONDS}, status=503)
        regions = {
            id: render_to_string(f"admin/django_redislock/{name}", page, request)
            for id, name in live.items()
        }
        return JsonResponse({"regions": regions, "interval": LIVE_SECONDS})
    return TemplateResponse(request, f"admin/django_redislock/{template}", page)


def log(request: HttpRequest, flag: int, objects: Sequence[tuple[str, str]], message: str) -> None:
    """Record an action in the admin's ``LogEntry`` table, one row per ``(id, name)``.

    Rows are created directly (not with ``log_action``/``log_actions``, whose
    signatures changed between Django 4.2, 5.1 and 6.0) and point at the
    ``Dashboard`` content type, so they show up in "Recent actions" and in
    the ``LogEntry`` admin with the name of the lock, task or queue.
    """
    content_type = ContentType.objects.get_for_model(Dashboard)
    LogEntry.objects.bulk_create(
        LogEntry(
            user_id=request.user.pk or 0,
            content_type=content_type,
            object_id=object_id,
            object_repr=name[:200],
            action_flag=flag,
            change_message=message,
        )
        for object_id, name in objects
    )


def runtime(seconds: float) -> str:
    """A run's duration: milliseconds below a second (most runs take a few: ``0.0 s`` said
    nothing), else :func:`duration`."""
    if 0 <= seconds < 1:
        return f"{seconds * 1000:.1f} ms" if seconds < 0.01 else f"{seconds * 1000:.0f} ms"
    return duration(seconds)


def duration(seconds: float | None) -> str:
    """A short human duration: ``0.4 s``, ``12 s``, ``3 min 5 s``, ``2 h 4 min``, ``3 d 2 h``."""
    if seconds is None or math.isnan(seconds):
        return "-"
    sign = "-" if seconds < 0 else ""
    left = abs(seconds)
    if left < 10:
        return f"{sign}{left:.1f} s"
    whole = int(left)
    steps = ((86400, "d", 3600, "h"), (3600, "h", 60, "min"), (60, "min", 1, "s"))
    for big, big_name, small, small_name in steps:
        if whole >= big:
            rest = (whole % big) // small
            tail = f" {rest} {small_name}" if rest else ""
            return f"{sign}{whole // big} {big_name}{tail}"
    return f"{sign}{whole} s"
