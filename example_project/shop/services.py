"""Operations that change a sale or an order outside the hot path, each under a lock.

The buy view needs no lock: the take script is atomic. A lock is the right tool
where one change spans Redis and the database and two operators or workers could
race: restocking a sale, and paying an order while its expiry may be running.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from django_redislock.decorators import distributed_lock
from django_redislock.queue import DELAYED, READY

from .models import Order, Product, Sale, pay_window
from .tasks import expire_order, expiry_id


def open_sale(
    product: Product,
    units: int,
    *,
    opens: datetime | None = None,
    closes: datetime | None = None,
    pay_within: timedelta | None = None,
    shards: int | None = None,
) -> Sale:
    """Create a sale and put its units in Redis with the same window.

    ``shards`` splits the units over that many buckets, each with its own order queue
    (``sale.stock.order_queues()``: a worker drains all of them; docs/seckill.md).
    """
    opens = opens or timezone.now()
    sale = Sale.objects.create(
        product=product,
        units=units,
        opens=opens,
        closes=closes or opens + timedelta(hours=1),
        pay_within=pay_within or pay_window(),
    )
    sale.stock.set(units, opens=sale.opens, closes=sale.closes, shards=shards)
    return sale


@distributed_lock("sale:{sale_id}", ttl=30, timeout=10)
def restock(sale_id: int, units: int) -> int:
    """Add units to a running sale; returns the units now left in Redis.

    The lock keeps the database total and the Redis stock in step when two
    operators restock the same sale at once.
    """
    with transaction.atomic():
        updated = Sale.objects.filter(pk=sale_id).update(units=F("units") + units)
        if not updated:
            raise Sale.DoesNotExist(f"no sale {sale_id}")
        return Sale.objects.get(pk=sale_id).stock.add(units)


@distributed_lock("order:{number}", ttl=30, timeout=10)
def pay_order(number: str) -> str:
    """Mark an order paid and cancel its expiry; returns the order's status afterwards.

    Runs under the same lock as ``expire_order``, so an order is either paid or
    expired, never both. The expiry task is removed with the queue's
    compare-score ``dequeue(id, score)``; if it is already running it will find
    the order paid and leave it alone.
    """
    order = Order.objects.get(number=number)
    if order.status != Order.PENDING:
        return order.status
    order.status, order.paid_at = Order.PAID, timezone.now()
    order.save(update_fields=["status", "paid_at"])
    queue = expire_order.queue
    queued = queue.get(expiry_id(number))
    if queued is not None and queued.state in (READY, DELAYED):
        queue.dequeue(queued.id, queued.score)
    return order.status
