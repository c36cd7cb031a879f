"""The shop's queue tasks: turn reservations into orders, expire the unpaid ones.

Both are idempotent, because the queue delivers at least once (a worker killed
mid-task leaves it to run again after its lease):

* ``create_order`` is keyed by the reservation id (``Order.number`` is unique),
  so a second run finds the order the first one made, and it orders only a
  reservation that is still live (never one whose unit went back on sale);
* ``expire_order`` runs under the order's lock and only acts on a pending
  order; a rerun of an expired one only repeats the (idempotent) restore.
"""

from __future__ import annotations

from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from django_redislock import task
from django_redislock.decorators import distributed_lock
from django_redislock.inventory import Reservation, Stock

from .models import Order, Sale, stock_item

#: The queue reservations' order tasks and expiries go to.
ORDERS_QUEUE = "orders"


def sale_stock(sale_id: int) -> Stock:
    """The stock of sale ``sale_id``; a take queues :func:`create_order` in the same script."""
    return Stock(stock_item(sale_id), order_task=create_order)


@task(queue=ORDERS_QUEUE, max_attempts=5)
def create_order(reservation: dict[str, Any]) -> str:
    """Create the order of a live reservation (once, however often it runs) and its expiry.

    A reservation that is no longer live was restored (the sale was deleted, an
    operator gave the unit back): its unit may have been sold again, so it is
    never ordered, even by a run of this task requeued from the dead letters.
    No lock is taken: the shop's own restores of a reservation without an order
    happen in this task, and the expiry restores only after the order exists (a
    rerun then finds the order and skips the check), so a worker killed here
    leaves nothing held that would delay the rerun.
    """
    taken = Reservation.from_dict(reservation)
    number = taken.id
    stock = Stock(taken.item, order_task=create_order)
    order = Order.objects.filter(number=number).first()
    if order is None:
        if stock.reservation(number) is None:
            return "not-live"
        sale = Sale.objects.filter(pk=taken.data.get("sale")).first()
        if sale is None:  # the sale was deleted: nothing to order, the unit goes back
            stock.restore(taken, rebuy=False)
            return "no-sale"
        try:
            with transaction.atomic():
                order, _ = Order.objects.get_or_create(
                    number=number,
                    defaults={
                        "sale": sale,
                        "buyer": taken.buyer,
                        "quantity": taken.qty,
                        "expires_at": timezone.now() + sale.pay_within,
                    },
                )
        except IntegrityError:  # a live order of this buyer exists already (Redis was wiped)
            stock.restore(taken, rebuy=False)
            return "refused"
    if order.status == Order.PENDING:
        schedule_expiry(order)
    return order.number


def schedule_expiry(order: Order) -> None:
    """Queue :func:`expire_order` for the end of the pay window (one per order: its id)."""
    delay = max((order.expires_at - timezone.now()).total_seconds(), 0.0)
    expire_order.enqueue(args=[order.number], id=expiry_id(order.number), delay=delay)


def expiry_id(number: str) -> str:
    """The queue id of an order's expiry task (paying removes it by this id)."""
    return f"expire:{number}"


@task(queue=ORDERS_QUEUE, max_attempts=10)
@distributed_lock("order:{number}", ttl=30, timeout=10)
def expire_order(number: str) -> str:
    """Expire an unpaid order and give its unit back; paid orders are left alone."""
    order = Order.objects.select_related("sale").filter(number=number).first()
    if order is None:
        return "missing"
    if order.status == Order.PENDING:
        order.status = Order.EXPIRED
        order.save(update_fields=["status"])
    if order.status == Order.EXPIRED:
        # after the status is saved, so a crash here reruns the task and restores then
        order.sale.stock.restore(order.number)
    return order.status
