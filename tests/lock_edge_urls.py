"""Views for the decorator edge tests: async class-based views, lost holds, any URL value."""

from __future__ import annotations

import asyncio
from typing import Any

from django.http import HttpRequest, HttpResponse, HttpResponseBase
from django.urls import path
from django.utils.decorators import method_decorator
from django.views import View

from django_redislock import distributed_lock, locks

#: How many bodies of each view run at this moment, and the most seen at once.
RUNNING: dict[str, int] = {}
PEAK: dict[str, int] = {}


async def _body(view: str) -> None:
    RUNNING[view] = RUNNING.get(view, 0) + 1
    PEAK[view] = max(PEAK.get(view, 0), RUNNING[view])
    try:
        await asyncio.sleep(0.05)
    finally:
        RUNNING[view] -= 1


@distributed_lock("acbv:{item}", ttl=5, timeout=10)
class AsyncItemView(View):
    async def get(self, request: HttpRequest, item: str) -> HttpResponse:
        await _body("class")
        return HttpResponse(f"item {item}")


class AsyncDispatchView(View):
    @distributed_lock("adispatch:{item}", ttl=5, timeout=10)
    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        return super().dispatch(request, *args, **kwargs)

    async def get(self, request: HttpRequest, item: str) -> HttpResponse:
        await _body("dispatch")
        return HttpResponse(f"item {item}")


@method_decorator(distributed_lock("mdispatch:{item}", ttl=5, timeout=10), name="dispatch")
class AsyncMethodDecoratedView(View):
    async def get(self, request: HttpRequest, item: str) -> HttpResponse:
        await _body("method_decorator")
        return HttpResponse(f"item {item}")


@method_decorator(distributed_lock("msync:{item}", ttl=5, timeout=0), name="dispatch")
class SyncMethodDecoratedView(View):
    def get(self, request: HttpRequest, item: str) -> HttpResponse:
        return HttpResponse(next(iter(locks["default"].held_locks())).name)


@distributed_lock("anykey:{key}", ttl=5, timeout=0)
def any_key(request: HttpRequest, key: str) -> HttpResponse:
    name = next(iter(locks["default"].held_locks())).name
    return HttpResponse(name)


@distributed_lock("lost:{n}", ttl=5, timeout=0)
def loses_its_lock(request: HttpRequest, n: int) -> HttpResponse:
    locks["default"].force_release(f"lost:{n}")  # an operator takes the lock away mid-request
    return HttpResponse("done", status=201)


@distributed_lock("lostok:{n}", ttl=5, timeout=0, on_release_lost="ignore")
def loses_its_lock_quietly(request: HttpRequest, n: int) -> HttpResponse:
    locks["default"].force_release(f"lostok:{n}")
    return HttpResponse("done", status=201)


@distributed_lock("alost:{n}", ttl=5, timeout=0)
async def loses_its_lock_async(request: HttpRequest, n: int) -> HttpResponse:
    locks["default"].force_release(f"alost:{n}")
    return HttpResponse("done", status=201)


urlpatterns = [
    path("acbv/<str:item>/", AsyncItemView.as_view()),
    path("adispatch/<str:item>/", AsyncDispatchView.as_view()),
    path("mdispatch/<str:item>/", AsyncMethodDecoratedView.as_view()),
    path("msync/<str:item>/", SyncMethodDecoratedView.as_view()),
    path("anykey/<path:key>", any_key),
    path("lost/<int:n>/", loses_its_lock),
    path("lostok/<int:n>/", loses_its_lock_quietly),
    path("alost/<int:n>/", loses_its_lock_async),
]
