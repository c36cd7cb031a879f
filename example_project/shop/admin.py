"""Products, sales (with their live Redis stock) and orders, next to the Redis dashboard."""

from __future__ import annotations

from contextlib import suppress
from contextvars import ContextVar
from typing import Any

import redis
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from django_redislock.exceptions import LockNotAcquired, RedisLockError
from django_redislock.metrics.deadline import DeadlineExceeded, admin_timeout, within

from .models import Order, Product, Sale
from .services import pay_order, restock


@admin.register(Product)
class ProductAdmin(admin.ModelAdmin):
    list_display = ["name", "price"]


#: The Redis numbers of the sales listed by the current changelist: sale pk -> stats or error.
_listed: ContextVar[dict[int, Any] | None] = ContextVar("shop_listed_stats", default=None)


def read_stats(sales: list[Sale]) -> dict[int, Any]:
    """Each sale's stock stats, read one after another under one admin deadline.

    A Redis that hangs costs the list ``REDISLOCK_ADMIN_TIMEOUT`` once (the sales
    not read by then say so), not the socket timeout of every cell.
    """
    found: dict[int, Any] = {}

    def run() -> None:
        for sale in sales:
            try:
                found[sale.pk] = sale.stock.stats()
            except (RedisLockError, redis.RedisError) as exc:
                found[sale.pk] = exc

    seconds = admin_timeout()
    with suppress(DeadlineExceeded):  # the sales read by then are shown, the others say why
        within(seconds * 0.75, run, key="shop-admin-sales")  # the rest renders the page
    late = DeadlineExceeded(f"Redis did not answer within the {seconds:g} s page deadline")
    return {sale.pk: found.get(sale.pk, late) for sale in sales}


@admin.register(Sale)
class SaleAdmin(admin.ModelAdmin):
    list_display = ["__str__", "opens", "closes", "units", "left_in_redis", "sold_in_redis"]
    actions = ["restock_ten"]

    @admin.display(description="left (Redis)")
    def left_in_redis(self, sale: Sale) -> str:
        return self._stat(sale, "remaining")

    @admin.display(description="sold (Redis)")
    def sold_in_redis(self, sale: Sale) -> str:
        return self._stat(sale, "sold")

    def get_changelist_instance(self, request: HttpRequest) -> Any:
        """The changelist, with the Redis numbers of its page read once, under one deadline."""
        changelist = super().get_changelist_instance(request)
        _listed.set(read_stats(list(changelist.result_list)))
        return changelist

    def _stat(self, sale: Sale, name: str) -> str:
        stats = (_listed.get() or {}).get(sale.pk)
        if stats is None:
            stats = read_stats([sale])[sale.pk]
        if isinstance(stats, Exception):
            return f"unavailable ({stats})"
        return str(getattr(stats, name)) if stats.exists else "not in Redis"

    @admin.action(description="Restock 10 units")
    def restock_ten(self, request: HttpRequest, queryset: QuerySet[Sale]) -> None:
        for sale in queryset:
            try:
                left = restock(sale.pk, 10)
            except LockNotAcquired:
                self.message_user(request, f"{sale}: someone else is restocking", messages.ERROR)
            except (RedisLockError, redis.RedisError) as exc:
                self.message_user(request, f"{sale}: not restocked, Redis: {exc}", messages.ERROR)
            else:
                self.message_user(request, f"{sale}: {left} units left", messages.SUCCESS)


@admin.register(Order)
class OrderAdmin(admin.ModelAdmin):
    list_display = ["number", "sale", "buyer", "quantity", "status", "created", "expires_at"]
    list_filter = ["status", "sale"]
    search_fields = ["number", "buyer"]
    actions = ["mark_paid"]

    @admin.action(description="Mark paid (cancels the expiry)")
    def mark_paid(self, request: HttpRequest, queryset: QuerySet[Order]) -> None:
        statuses = []
        for order in queryset:
            try:
                statuses.append(pay_order(order.number))
            except (RedisLockError, redis.RedisError) as exc:
                self.message_user(
                    request, f"{order.number}: not marked paid, Redis: {exc}", messages.ERROR
                )
        self.message_user(request, f"{statuses.count(Order.PAID)} paid", messages.SUCCESS)
