"""Products, sales (with their live Redis stock) and orders, next to the Redis dashboard."""

from __future__ import annotations

import redis
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from django_redislock.exceptions import LockNotAcquired, RedisLockError

from .models import Order, Product, Sale
from .services import pay_order, restock


@admin.register(Product)
class ProductAdmin(admin.ModelAdmin):
    list_display = ["name", "price"]


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

    def _stat(self, sale: Sale, name: str) -> str:
        try:
            stats = sale.stock.stats()
        except RedisLockError as exc:
            return f"unavailable ({exc.__class__.__name__})"
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
