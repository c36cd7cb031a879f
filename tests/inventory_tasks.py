"""Order tasks the inventory tests queue from the take script (found by their dotted path)."""

from __future__ import annotations

from typing import Any

from django_redislock import task

#: Reservations the order task received in this process, in order.
ORDERS: list[dict[str, Any]] = []


@task(queue="orders")
def record_order(reservation: dict[str, Any]) -> str:
    ORDERS.append(reservation)
    return str(reservation["id"])
