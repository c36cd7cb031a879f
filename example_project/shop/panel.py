"""The stocks the Redis dashboard's flash-sale panel watches (``REDISLOCK_ADMIN_STOCKS``)."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from django_redislock.inventory import Stock

from .models import Sale

#: Sales this close to their window (before it opens, after it closes) are shown too.
MARGIN = timedelta(hours=1)


def live_stocks() -> list[tuple[str, Stock]]:
    """The stocks of sales whose window is open, opens within the hour or closed within it.

    Each is labelled with its sale (product, units, opening), which the panel shows
    above the stock's name in Redis.
    """
    now = timezone.now()
    sales = Sale.objects.filter(opens__lte=now + MARGIN, closes__gte=now - MARGIN)
    return [
        (str(sale), sale.stock) for sale in sales.select_related("product").order_by("-opens")[:50]
    ]
