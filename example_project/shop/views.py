"""The sale page, its live stock endpoint, the buy button and paying.

The buy view touches no database row: the stock's name comes from the URL and
one Lua script decides, so it answers at once (202 with the reservation, 409
when sold out or already bought) and the order is written later by a worker.
"""

from __future__ import annotations

import functools
import logging
import math
from collections.abc import Callable
from typing import Any

import redis
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST

from django_redislock.exceptions import ConnectionFailed, InvalidArgument, LockNotAcquired
from django_redislock.inventory import TakeResult

from .models import Order, Sale
from .services import pay_order
from .tasks import sale_stock

#: HTTP status of each take result.
STATUS = {
    TakeResult.OK: 202,
    TakeResult.SOLD_OUT: 409,
    TakeResult.ALREADY_BOUGHT: 409,
    TakeResult.NOT_OPEN: 409,
    TakeResult.ENDED: 409,
    TakeResult.UNKNOWN: 404,
    TakeResult.RATE_LIMITED: 429,
}
#: Most units one request may buy.
MAX_QTY = 5
#: Seconds a client is asked to wait before retrying while Redis is unavailable.
RETRY_AFTER = 2
#: What "Redis is unavailable" looks like from a view (down, timed out, BUSY, OOM, ...).
UNAVAILABLE: tuple[type[Exception], ...] = (ConnectionFailed, LockNotAcquired, redis.RedisError)
#: Buyer names of signed-in users; anonymous visitors may not pick one of these.
USER_PREFIX = "user:"

logger = logging.getLogger("django_redislock.example.shop")


def unavailable_as_json(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Answer a JSON 503 with ``Retry-After`` when Redis cannot serve ``view``, not an HTML 500.

    The sale page polls ``stock.json`` every second; a 503 with a body it can
    read lets it show "try again" and back off instead of counting errors.
    """

    @functools.wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        try:
            return view(request, *args, **kwargs)
        except UNAVAILABLE as exc:
            logger.warning("%s: Redis unavailable: %s", request.path, exc)
            response = JsonResponse(
                {"error": "unavailable", "detail": "The shop cannot reach its store; retry soon."},
                status=503,
            )
            response["Retry-After"] = str(RETRY_AFTER)
            return response

    return wrapped


def index(request: HttpRequest) -> HttpResponse:
    """The latest sale's page (or a hint to open one)."""
    sale = Sale.objects.order_by("-pk").first()
    if sale is None:
        return HttpResponse("No sale yet: run `python3 dev.py demo` or add one in the admin.")
    return redirect("shop:sale", sale_id=sale.pk)


def sale_page(request: HttpRequest, sale_id: int) -> HttpResponse:
    """The flash-sale page: a buy button and the remaining stock, polled live."""
    sale = get_object_or_404(Sale.objects.select_related("product"), pk=sale_id)
    try:
        stats = sale.stock.stats()
    except UNAVAILABLE as exc:
        logger.warning("sale page %s: Redis unavailable: %s", sale_id, exc)
        response = render(request, "shop/sale.html", {"sale": sale, "stats": None}, status=503)
        response["Retry-After"] = str(RETRY_AFTER)
        return response
    return render(request, "shop/sale.html", {"sale": sale, "stats": stats})


@never_cache
@unavailable_as_json
def stock_json(request: HttpRequest, sale_id: int) -> JsonResponse:
    """Units left, sold, buyers and the sale's state, from one Redis script."""
    return JsonResponse(sale_stock(sale_id).stats().as_dict())


def buyer_of(request: HttpRequest) -> str:
    """``user:<pk>`` for a signed-in user; anonymous visitors name themselves (a demo shortcut).

    The two never meet: a user's name carries the ``user:`` prefix, which an
    anonymous name may not (``buyer=1`` is not the user with pk 1).
    """
    if request.user.is_authenticated:
        return f"{USER_PREFIX}{request.user.pk}"
    name = request.POST.get("buyer", "")
    if name.startswith(USER_PREFIX):
        raise InvalidArgument(
            f"buyer names starting with {USER_PREFIX!r} belong to signed-in users"
        )
    return name


@require_POST
@unavailable_as_json
def buy(request: HttpRequest, sale_id: int) -> JsonResponse:
    """Take units for the buyer: 202 with the reservation, 409 when refused, 400 bad input."""
    try:
        qty = int(request.POST.get("qty", "1"))
    except ValueError:
        return JsonResponse({"error": "qty must be a whole number"}, status=400)
    if not 1 <= qty <= MAX_QTY:
        return JsonResponse({"error": f"qty must be 1-{MAX_QTY}"}, status=400)
    try:
        buyer = buyer_of(request)
        take = sale_stock(sale_id).take(qty, buyer=buyer, data={"sale": sale_id})
    except InvalidArgument as exc:
        return JsonResponse({"error": str(exc)}, status=400)
    body: dict[str, object] = {"result": take.result.value, "remaining": take.remaining}
    if take.reservation is not None:
        body |= {"reservation": take.reservation.id, "order": take.reservation.id}
    response = JsonResponse(body, status=STATUS[take.result])
    if take.result is TakeResult.RATE_LIMITED:
        response["Retry-After"] = str(max(1, math.ceil(take.retry_after)))
    return response


@never_cache
@unavailable_as_json
def order_json(request: HttpRequest, number: str) -> JsonResponse:
    """An order's status (404 until the worker has written it)."""
    order = get_object_or_404(Order, number=number)
    return JsonResponse(
        {
            "order": order.number,
            "status": order.status,
            "buyer": order.buyer,
            "quantity": order.quantity,
            "expires_at": order.expires_at.isoformat(),
        }
    )


@require_POST
@unavailable_as_json
def pay(request: HttpRequest, number: str) -> JsonResponse:
    """Pay an order: 200 when it is paid, 409 when it had expired."""
    get_object_or_404(Order, number=number)
    status = pay_order(number)
    return JsonResponse(
        {"order": number, "status": status}, status=200 if status == "paid" else 409
    )
