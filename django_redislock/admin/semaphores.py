"""A semaphore looked up by name: every permit (expired ones too) and waiter, 200 of each.

The semaphores in use are listed with their holders and waiters by :mod:`.coordination`,
from the coordination index their scripts keep. This page reads one semaphore by its name
instead, whether or not it is in use: its permits (``<owner>@<fence>`` and deadline) and its
waiters (arrival order, lease deadline), with one read-only script
(``admin_semaphore_get.lua``: two bounded ``ZRANGE``, at most :data:`SHOWN` of each, and
their counts) on the semaphore's slot. A permit whose deadline has passed is shown as
expired: the next acquire reclaims it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.http import HttpRequest, HttpResponse

from ..calls.script import script
from ..exceptions import InvalidArgument
from ..handlers import locks
from ..locking.keys import check_name, lock_key
from ..wire import to_text
from .common import REDIS_ERRORS, duration, read, render, require, url
from .common import lock_key as read_key

if TYPE_CHECKING:
    from django.contrib.admin import ModelAdmin

#: Permits and waiters shown at most, each.
SHOWN = 200


def read_semaphore(backend: Any, name: str) -> dict[str, Any]:
    """Permits, waiters and their counts of semaphore ``name`` (one read-only script)."""
    keys = [lock_key(backend, name, part) for part in ("sp", "sq", "sd")]
    with backend.errors():
        reply = script("admin_semaphore_get").run(backend.client, keys, [SHOWN])
    now_ms, permit_count, waiter_count, permits, waiters = reply[:5]
    now = int(now_ms)

    def left(deadline: Any) -> str:
        return "-" if deadline in (b"", "", None) else duration((float(deadline) - now) / 1000)

    return {
        "permits": [
            {
                "id": to_text(permits[i]),
                "left": left(permits[i + 1]),
                "expired": float(permits[i + 1]) <= now,
            }
            for i in range(0, len(permits), 2)
        ],
        "permit_count": int(permit_count),
        "waiters": [
            {
                "owner": to_text(waiters[i]),
                "arrival": int(float(waiters[i + 1])),
                "left": left(waiters[i + 2]),
            }
            for i in range(0, len(waiters), 3)
        ],
        "waiter_count": int(waiter_count),
    }


def semaphore_page(model_admin: ModelAdmin[Any], request: HttpRequest) -> HttpResponse:
    """A GET form: alias and name; the semaphore's permits and waiters when a name is given."""
    require(request)
    aliases = list(locks)
    alias = request.GET.get("alias") or (aliases[0] if aliases else "")
    name = request.GET.get("name", "")
    found: dict[str, Any] | None = None
    error = ""
    if name:
        try:
            if alias not in locks:
                raise InvalidArgument(f"REDISLOCK_LOCKS has no alias {alias!r}")
            backend = locks[alias]
            try:
                backend.semaphore(name, 1)  # checks the name; refused by Redlock aliases
            except NotImplementedError as exc:
                raise InvalidArgument(str(exc)) from exc
            check_name(name)
            found = read(lambda: read_semaphore(backend, name), key=read_key(alias))
        except REDIS_ERRORS as exc:
            error = str(exc)
    return render(
        model_admin,
        request,
        "semaphore.html",
        "Semaphore lookup",
        crumbs=[("Held locks", url("locks")), ("Semaphore lookup", "")],
        aliases=aliases,
        alias=alias,
        name=name,
        found=found,
        error=error,
        shown=SHOWN,
    )
