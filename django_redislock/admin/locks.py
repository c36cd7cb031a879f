"""The locks page (held locks of one alias, by name, with a prefix filter) and force release.

A page is one pipeline over the lock index buckets (``held_locks_page``),
paged by name both ways, never by page number: the next page starts after
the last name shown (``?after=``) and the previous page is the one that
ends before the first (``?before=``, a backward walk of the index), so a
page deep in a long listing costs what the first one does. Force release
is confirmed on GET and done on POST; the form carries the fence the operator
saw, and the POST refuses when the lock has changed hands since (a new
holder has a new fence), so a stale tab can't release someone else's hold.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib import messages
from django.contrib.admin.models import CHANGE
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.utils.http import urlencode

from ..exceptions import ConfigurationError
from ..handlers import locks
from ..locking.index import HeldLock
from ..models import RELEASE_LOCKS
from .common import (
    REDIS_ERRORS,
    can,
    duration,
    lock_key,
    log,
    parse_int,
    read,
    render,
    require,
    unquote,
    url,
)
from .data import PAGE_SIZE, find_lock

if TYPE_CHECKING:
    from django.contrib.admin import ModelAdmin

    from ..backends.base import BaseLockBackend


def backend_of(alias: str) -> Any:
    """The lock backend of ``alias``; 404 for an alias that isn't configured."""
    try:
        if alias not in locks:
            return None
        return locks[alias]
    except ConfigurationError as exc:
        raise Http404(str(exc)) from exc


def holder(held: HeldLock) -> str:
    """``host pid N, thread T`` (or ``task T``): enough to find the process."""
    parts = [held.host or "?"]
    if held.pid is not None:
        parts.append(f"pid {held.pid}")
    if held.task:
        parts.append(f"task {held.task}")
    elif held.thread:
        parts.append(f"thread {held.thread}")
    return ", ".join(parts)


def lock_row(alias: str, held: HeldLock) -> dict[str, Any]:
    return {
        "lock": held,
        "holder": holder(held),
        "remaining": duration(held.expires_in),
        "count_label": f"{held.count} readers" if held.kind == "read" else str(held.count),
        "release_url": url("release", alias, held.name),
    }


def page_link(alias: str, prefix: str, direction: str, cursor: str | None) -> str:
    """The URL of the page ``after`` or ``before`` the name ``cursor``; "" without a cursor."""
    if cursor is None:
        return ""
    return url("locks", query=urlencode({"alias": alias, "prefix": prefix, direction: cursor}))


#: Kinds the locks page filters by.
KINDS = ("mutex", "reentrant", "read", "write")
#: Sort orders of the locks page besides name order.
SORTS = {
    "age": (
        "longest held first",
        lambda held: held.acquired_at.timestamp() if held.acquired_at else 0,
    ),
    "ttl": ("soonest expiry first", lambda held: held.expires_in),
}
#: Most held locks a filtered or sorted view reads (in name order) before filtering: pages of
#: 1,000 (the most one listing returns), five at most.
FILTER_LIMIT = 5000
FILTER_STEP = 1000


def holder_matches(held: HeldLock, text: str) -> bool:
    """True when ``text`` occurs in the holder's host, pid, thread, task or owner token."""
    fields = (held.host, str(held.pid or ""), held.thread or "", held.task or "", held.owner)
    return any(text.lower() in field.lower() for field in fields)


def filtered_page(
    backend: BaseLockBackend, prefix: str, *, kind: str, holder: str, sort: str, number: int
) -> tuple[list[HeldLock], int, bool]:
    """A page of the held locks that pass the filters, in ``sort`` order.

    Reads up to :data:`FILTER_LIMIT` held locks in name order (1,000 a listing,
    each two round trips), then filters and sorts them here:
    ``(page of locks, how many passed, whether the read stopped at the limit)``.
    """
    seen: list[HeldLock] = []
    after: str | None = None
    more = True
    while more and len(seen) < FILTER_LIMIT:
        page = backend.held_locks_page(prefix=prefix, limit=FILTER_STEP, after=after)
        seen += page.locks
        after = page.next_after
        more = after is not None
    picked = [
        held
        for held in seen
        if (not kind or held.kind == kind) and (not holder or holder_matches(held, holder))
    ]
    if sort in SORTS:
        picked.sort(key=SORTS[sort][1])
    start = (number - 1) * PAGE_SIZE
    return picked[start : start + PAGE_SIZE], len(picked), more


def locks_page(model_admin: ModelAdmin[Any], request: HttpRequest) -> HttpResponse:
    """Held locks of the chosen alias whose name starts with the ``prefix`` filter.

    With a kind or holder filter, or sorted by age or TTL, the page is one of
    the filtered view (see :func:`filtered_page`) and the count follows the
    filter; otherwise it pages the whole index in name order.
    """
    require(request)
    kind = request.GET.get("kind", "")
    kind = kind if kind in KINDS else ""
    holder = request.GET.get("holder", "").strip()
    sort = request.GET.get("sort", "")
    sort = sort if sort in SORTS else ""
    number = parse_int(request.GET.get("page"), 1, 10_000) or 1
    filtered = bool(kind or holder or sort)
    aliases = list(locks)
    alias = request.GET.get("alias") or (aliases[0] if aliases else "")
    backend = backend_of(alias)
    if backend is None:
        raise Http404(f"REDISLOCK_LOCKS has no alias {alias!r}")
    prefix = request.GET.get("prefix", "")
    after = request.GET.get("after") or None
    before = request.GET.get("before") or None
    rows: list[dict[str, Any]] = []
    total, next_url, previous_url, error = None, "", "", ""
    truncated = False
    try:
        if not backend.supports_listing:
            raise Http404(f"{type(backend).__name__} cannot list its locks")
        if filtered:
            held_rows, total, truncated = read(
                lambda: filtered_page(
                    backend, prefix, kind=kind, holder=holder, sort=sort, number=number
                ),
                key=lock_key(alias),
            )
            rows = [lock_row(alias, held) for held in held_rows]
            query = {"alias": alias, "prefix": prefix, "kind": kind, "holder": holder, "sort": sort}
            if number > 1:
                previous_url = url("locks", query=urlencode({**query, "page": str(number - 1)}))
            if number * PAGE_SIZE < total:
                next_url = url("locks", query=urlencode({**query, "page": str(number + 1)}))
        else:
            page = read(
                lambda: backend.held_locks_page(
                    prefix=prefix, limit=PAGE_SIZE, after=after, before=before
                ),
                key=lock_key(alias),
            )
            rows = [lock_row(alias, held) for held in page.locks]
            total = page.total
            next_url = page_link(alias, prefix, "after", page.next_after)
            previous_url = page_link(alias, prefix, "before", page.previous_before)
    except REDIS_ERRORS as exc:
        error = str(exc)
    return render(
        model_admin,
        request,
        "locks.html",
        "Held locks",
        crumbs=[("Held locks", "")],
        live=None if error else {"lock-rows": "_locks_rows.html"},
        aliases=[(name, url("locks", query=urlencode({"alias": name}))) for name in aliases],
        alias=alias,
        prefix=prefix,
        paged=after is not None or before is not None or number > 1,
        kinds=KINDS,
        kind=kind,
        holder=holder,
        sort=sort,
        sorts=[(key, label) for key, (label, _) in SORTS.items()],
        filtered=filtered,
        truncated=truncated,
        filter_limit=FILTER_LIMIT,
        rows=rows,
        total=total,
        next_url=next_url,
        previous_url=previous_url,
        first_url=url("locks", query=urlencode({"alias": alias, "prefix": prefix})),
        error=error,
        may_release=can(request, RELEASE_LOCKS),
    )


def release(
    model_admin: ModelAdmin[Any], request: HttpRequest, alias: str, name: str
) -> HttpResponse:
    """Force-release lock ``name``: a confirmation page on GET, the release on POST."""
    require(request, RELEASE_LOCKS)
    alias, name = unquote(alias), unquote(name)
    backend = backend_of(alias)
    if backend is None or not backend.supports_listing:
        raise Http404(f"REDISLOCK_LOCKS has no listable alias {alias!r}")
    back = url("locks", query=urlencode({"alias": alias}))
    try:
        held = read(lambda: find_lock(backend, name), key=lock_key(alias))
        if held is None:
            messages.warning(request, f"Lock “{name}” is not held any more; nothing to release.")
            return HttpResponseRedirect(back)
        if request.method != "POST":
            return render(
                model_admin,
                request,
                "release.html",
                "Force-release a lock",
                crumbs=[("Held locks", back), (name, "")],
                row=lock_row(alias, held),
                alias=alias,
                back_url=back,
            )
        seen = request.POST.get("fence", "")
        if str(held.fence) != seen:
            messages.warning(
                request,
                f"Lock “{name}” changed hands since you looked (fence {seen or '?'} is now "
                f"{held.fence}); nothing was released. Check the new holder first.",
            )
            return HttpResponseRedirect(back)
        ended = backend.force_release(name, fence=held.fence)
    except REDIS_ERRORS as exc:
        messages.error(request, f"Could not release lock “{name}”: {exc}")
        return HttpResponseRedirect(back)
    if not ended:
        messages.warning(
            request,
            f"Lock “{name}” (fence {held.fence}) ended or changed hands before the release "
            f"reached it; nothing was released.",
        )
        return HttpResponseRedirect(back)
    log(
        request,
        CHANGE,
        [(f"lock:{alias}:{name}", f"lock {name}")],
        f"Force-released lock {name!r} on alias {alias!r} (fence {held.fence}, "
        f"held by {holder(held)}).",
    )
    messages.success(request, f"Released lock “{name}” (fence {held.fence}).")
    return HttpResponseRedirect(back)
