"""The stocks the Redis dashboard's flash-sale panel watches (``REDISLOCK_ADMIN_STOCKS``)."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from django_redislock.inventory import Stock

from .models import Sale

#: Sales this close to their window (before it opens, after it closes) are shown too.
MARGIN = timedelta(hours=1)


def live_stocks() -> list[Stock]:
    """The stocks of sales whose window is open, opens within the hour or closed within it."""
    now = timezone.now()
    sales = Sale.objects.filter(opens__lte=now + MARGIN, closes__gte=now - MARGIN)
    return [sale.stock for sale in sales.order_by("-opens")[:50]]
