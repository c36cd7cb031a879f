"""Views guarded by ``@distributed_lock``, for the decorator tests (``ROOT_URLCONF`` override)."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse, HttpResponseBase
from django.urls import path
from django.views import View

from django_redislock import distributed_lock


@distributed_lock("order:{order_id}", ttl=5, timeout=0)
def pay(request: HttpRequest, order_id: int) -> HttpResponse:
    return HttpResponse(f"paid {order_id}")


@distributed_lock("user:{request.user.pk}", ttl=5, timeout=0)
async def async_profile(request: HttpRequest) -> HttpResponse:
    return HttpResponse("profile")


@distributed_lock("doc:{doc_id}", ttl=5, timeout=0)
class DocView(View):
    def get(self, request: HttpRequest, doc_id: int) -> HttpResponse:
        return HttpResponse(f"doc {doc_id}")


class ExportView(View):
    @distributed_lock("export:{kind}", ttl=5, timeout=0, on_locked="raise")
    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        return super().dispatch(request, *args, **kwargs)

    def get(self, request: HttpRequest, kind: str) -> HttpResponse:
        return HttpResponse(f"export {kind}")


urlpatterns = [
    path("pay/<int:order_id>/", pay),
    path("profile/", async_profile),
    path("doc/<int:doc_id>/", DocView.as_view()),
    path("export/<str:kind>/", ExportView.as_view()),
]
