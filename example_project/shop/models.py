"""Products, sales and orders. Stock itself lives in Redis (see ``Sale.stock``)."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

if TYPE_CHECKING:
    from django_redislock.inventory import Stock


class Product(models.Model):
    name = models.CharField(max_length=100)
    price = models.DecimalField(max_digits=10, decimal_places=2)

    def __str__(self) -> str:
        return self.name


class Sale(models.Model):
    """A flash sale: ``units`` of a product between ``opens`` and ``closes``."""

    product = models.ForeignKey(Product, on_delete=models.PROTECT, related_name="sales")
    units = models.PositiveIntegerField(help_text="Units put on sale, restocks included.")
    opens = models.DateTimeField(default=timezone.now)
    closes = models.DateTimeField()
    pay_within = models.DurationField(
        default=timedelta(minutes=15), help_text="How long a buyer has to pay."
    )

    class Meta:
        ordering = ["-opens"]

    def __str__(self) -> str:
        return f"{self.product} x{self.units} ({self.opens:%Y-%m-%d %H:%M})"

    @property
    def item(self) -> str:
        """The stock's name in Redis."""
        return stock_item(self.pk)

    @property
    def stock(self) -> Stock:
        """This sale's stock in Redis, whose takes queue ``shop.tasks.create_order``."""
        from .tasks import sale_stock

        return sale_stock(self.pk)


def stock_item(sale_id: int) -> str:
    """The stock name of a sale (the buy view needs no database row to build it)."""
    return f"sale-{sale_id}"


def pay_window() -> timedelta:
    """The default pay window (``SHOP_PAY_WITHIN`` seconds)."""
    return timedelta(seconds=float(getattr(settings, "SHOP_PAY_WITHIN", 900)))


class Order(models.Model):
    """One order per reservation: ``number`` is the reservation id, so creating it is idempotent."""

    PENDING = "pending"
    PAID = "paid"
    EXPIRED = "expired"
    STATUSES = [(PENDING, "Waiting for payment"), (PAID, "Paid"), (EXPIRED, "Expired unpaid")]

    number = models.CharField(max_length=64, unique=True)
    sale = models.ForeignKey(Sale, on_delete=models.PROTECT, related_name="orders")
    buyer = models.CharField(max_length=200)
    quantity = models.PositiveIntegerField(default=1)
    status = models.CharField(max_length=10, choices=STATUSES, default=PENDING)
    created = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    paid_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created"]
        constraints = [
            # the database's own guard behind the stock's buyer set
            models.UniqueConstraint(
                fields=["sale", "buyer"],
                condition=Q(status__in=["pending", "paid"]),
                name="one_live_order_per_buyer_and_sale",
            )
        ]

    def __str__(self) -> str:
        return f"order {self.number} ({self.status})"
