"""Flash-sale (seckill) inventory: stock that can never oversell or order twice.

::

    from django_redislock.inventory import Stock, TakeResult

    stock = Stock("phone-x", order_task=create_order)   # a @task taking reservation=
    stock.set(100, opens=start, closes=end)
    take = stock.take(buyer=request.user.pk)
    if take.result is TakeResult.OK:
        ...  # 202: take.reservation.id is the order number; the order task is queued

One Lua script checks the window, refuses a buyer who already holds a
reservation, refuses when units are short, takes the units, records the
reservation and queues the order task, so no sold unit can be left without an
order even if the process dies right after it. See ``docs/seckill.md``.
"""

from __future__ import annotations

from .records import Reservation, StockStats, Take, TakeResult
from .stock import Stock

__all__ = ["Reservation", "Stock", "StockStats", "Take", "TakeResult"]
