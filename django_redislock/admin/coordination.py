"""The semaphores and fair locks page (holders and waiters) and their force release.

The listing reads the coordination index (:mod:`django_redislock.locking.coordindex`): the
scripts that grant a permit or a fair hold, or queue a waiter, record the primitive there,
so the page lists them without ``SCAN`` or ``KEYS``, in two round trips. Each primitive
shows its holders (id, TTL left, fence) and its waiters in arrival order.

Force release ends one permit of a semaphore, or a fair lock's hold, as the locks page's
force release does: a confirmation page on GET, the release on POST with the permit id or
fence the operator saw (a permit id is never reused; a fair hold granted again has a new
fence, and the POST then changes nothing), an admin ``LogEntry`` for the audit trail.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib import messages
from django.contrib.admin.models import CHANGE
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.utils.http import urlencode

from ..handlers import locks
from ..locking import coordindex
from ..locking.coordindex import Coordinated, Holder
from ..models import RELEASE_LOCKS
from .common import REDIS_ERRORS, can, duration, lock_key, log, read, render, require, unquote, url
from .locks import backend_of

if TYPE_CHECKING:
    from django.contrib.admin import ModelAdmin

#: Primitives the page shows at most (the index counts them all).
LISTED = 200
#: Holders and waiters shown per primitive.
SHOWN = 20
#: Holders read to find the one a force release names (a semaphore may have many permits).
FIND_SHOWN = 10_000
#: Kinds in URLs -> what the page calls them.
KIND_LABELS = {"semaphore": "semaphore", "fair": "fair lock", "latch": "latch"}
#: Kinds with a force release (a latch has no holder to release).
RELEASABLE = ("semaphore", "fair")


def holder_text(holder: Holder) -> str:
    """``host pid N, thread T`` from a fair hold's metadata; "" for a permit (it has none)."""
    info = holder.info
    if not info:
        return ""
    parts = [str(info.get("host") or "?")]
    if info.get("pid") is not None:
        parts.append(f"pid {info['pid']}")
    if info.get("task"):
        parts.append(f"task {info['task']}")
    elif info.get("thread"):
        parts.append(f"thread {info['thread']}")
    return ", ".join(parts)


def entry_row(alias: str, entry: Coordinated) -> dict[str, Any]:
    release = url("coord_release", alias, entry.kind, entry.name)
    return {
        "entry": entry,
        "label": KIND_LABELS[entry.kind],
        "holders": [
            {
                "holder": h,
                "who": holder_text(h),
                "left": duration(h.expires_in),
                "release_url": f"{release}?{urlencode({'id': h.id})}",
            }
            for h in entry.holders
        ],
        "waiters": [
            {"waiter": w, "left": "-" if w.lease_left is None else duration(w.lease_left)}
            for w in entry.waiters
        ],
        "more_holders": entry.holder_count - len(entry.holders),
        "more_waiters": entry.waiter_count - len(entry.waiters),
    }


def listable(alias: str) -> Any:
    """The backend of ``alias`` if it can list semaphores and fair locks; 404 otherwise."""
    backend = backend_of(alias)
    if backend is None or not getattr(backend, "supports_coordination", False):
        raise Http404(f"REDISLOCK_LOCKS has no alias {alias!r} with semaphores and fair locks")
    return backend


def coordination_page(model_admin: ModelAdmin[Any], request: HttpRequest) -> HttpResponse:
    """The semaphores and fair locks in use on the chosen alias, with holders and waiters."""
    require(request)
    aliases = list(locks)
    alias = request.GET.get("alias") or (aliases[0] if aliases else "")
    backend = listable(alias)
    rows: list[dict[str, Any]] = []
    total: int | None = None
    error = ""
    try:
        found = read(
            lambda: coordindex.listing(backend, limit=LISTED, shown=SHOWN), key=lock_key(alias)
        )
        rows = [entry_row(alias, entry) for entry in found.entries]
        total = found.total
    except REDIS_ERRORS as exc:
        error = str(exc)
    return render(
        model_admin,
        request,
        "coordination.html",
        "Semaphores and fair locks",
        crumbs=[
            ("Held locks", url("locks", query=urlencode({"alias": alias}))),
            ("Semaphores and fair locks", ""),
        ],
        live=None if error else {"coord-rows": "_coord_rows.html"},
        aliases=[(name, url("coordination", query=urlencode({"alias": name}))) for name in aliases],
        alias=alias,
        rows=rows,
        total=total,
        listed=LISTED,
        error=error,
        may_release=can(request, RELEASE_LOCKS),
    )


def _find_holder(entry: Coordinated, holder_id: str) -> Holder | None:
    return next((h for h in entry.holders if h.id == holder_id), None)


def coordination_release(
    model_admin: ModelAdmin[Any], request: HttpRequest, alias: str, kind: str, name: str
) -> HttpResponse:
    """Force-release one permit of a semaphore or a fair lock's hold (GET asks, POST does)."""
    require(request, RELEASE_LOCKS)
    alias, kind, name = unquote(alias), unquote(kind), unquote(name)
    if kind not in RELEASABLE:
        raise Http404(f"no force release for kind {kind!r}")
    backend = listable(alias)
    back = url("coordination", query=urlencode({"alias": alias}))
    label = KIND_LABELS[kind]
    holder_id = (request.POST if request.method == "POST" else request.GET).get("id", "")
    try:
        entry = read(
            lambda: coordindex.find(backend, kind, name, shown=FIND_SHOWN), key=lock_key(alias)
        )
        holder = _find_holder(entry, holder_id)
        if holder is None:
            messages.warning(
                request,
                f"The {label} “{name}” is not held by “{holder_id}” any more; nothing to release.",
            )
            return HttpResponseRedirect(back)
        if request.method != "POST":
            return render(
                model_admin,
                request,
                "coord_release.html",
                f"Force-release a {label}",
                crumbs=[("Semaphores and fair locks", back), (name, "")],
                row=entry_row(alias, entry),
                holder=holder,
                who=holder_text(holder),
                left=duration(holder.expires_in),
                label=label,
                alias=alias,
                back_url=back,
            )
        if kind == "semaphore":
            ended = coordindex.force_release_permit(backend, name, holder.id)
        else:
            ended = holder.fence is not None and coordindex.force_release_fair(
                backend, name, holder.fence
            )
    except REDIS_ERRORS as exc:
        messages.error(request, f"Could not release the {label} “{name}”: {exc}")
        return HttpResponseRedirect(back)
    what = f"permit {holder.id}" if kind == "semaphore" else f"hold {holder.id}"
    if not ended:
        messages.warning(
            request,
            f"The {label} “{name}” ({what}, fence {holder.fence}) ended or changed hands before "
            f"the release reached it; nothing was released.",
        )
        return HttpResponseRedirect(back)
    log(
        request,
        CHANGE,
        [(f"{kind}:{alias}:{name}", f"{label} {name}")],
        f"Force-released {what} of {label} {name!r} on alias {alias!r} (fence {holder.fence}"
        + (f", held by {holder_text(holder)}" if holder.info else "")
        + ").",
    )
    messages.success(request, f"Released {what} of the {label} “{name}” (fence {holder.fence}).")
    return HttpResponseRedirect(back)
