"""The take script's answers on its common paths are a string or an integer, not an array.

At the server an array costs a Lua table and its conversion, so the two answers a sale sends
most (taken, sold out) are the cheapest the server can send: a taken answer is the request's
record itself (``"<units left>:<µs>"``, which a resend answers as it stands), sold out is the
units left as an integer; the rarer refusals keep ``{code, units, time}``. A take without an
order task sends no empty payload argument (docs/seckill.md, "What a take costs at the
server").
"""

from __future__ import annotations

from typing import Any

from django_redislock.inventory import Stock, TakeResult, sold_out
from django_redislock.queue.sending import run_call
from django_redislock.wire import to_text

from . import inventory_tasks
from .conftest import RedisTarget


def raw_answer(stock: Stock, buyer: str) -> tuple[Any, Any]:
    """The take script's reply for ``buyer``, unparsed, and the call that got it."""
    sold_out.memory.clear()  # a fresh process: the whole take is sent
    call = stock._take_call(1, buyer, None)
    return run_call(stock.backend, stock._script_call(call)), call


def test_taken_and_sold_out_answers_are_a_string_and_an_integer(
    redis_target: RedisTarget,
) -> None:
    stock = Stock(
        "answers", order_task=inventory_tasks.record_order, using=redis_target.queue_backend()
    )
    stock.set(1)
    taken, call = raw_answer(stock, "a")
    assert isinstance(taken, (bytes, str))
    left, at = to_text(taken).split(":")
    record = redis_target.raw.get(stock._built_keys().request + call.request)
    assert to_text(record) == to_text(taken) and int(left) == 0 and int(at) > 0
    # the resend of the take that took answers its record
    assert to_text(run_call(stock.backend, stock._script_call(call))) == to_text(taken)
    assert stock._run(call).result is TakeResult.OK
    refused, _ = raw_answer(stock, "b")
    assert refused == 0 and isinstance(refused, int)  # sold out, 0 units left
    stock.add(1)
    duplicate, _ = raw_answer(stock, "a")
    assert [int(value) for value in duplicate[:2]] == [2, 1]  # already bought, 1 unit left


def test_a_take_without_an_order_task_sends_no_payload_argument(
    redis_target: RedisTarget,
) -> None:
    plain = Stock("no-order", using=redis_target.queue_backend())
    with_order = Stock(
        "with-order", order_task=inventory_tasks.record_order, using=redis_target.queue_backend()
    )
    assert len(plain._take_call(1, "a", None).args) == 4  # qty, buyer, id, record TTL
    assert len(with_order._take_call(1, "a", None).args) == 5  # and the payload
    plain.set(2)
    assert plain.take(buyer="a").ok and plain.take(buyer="a").result is TakeResult.ALREADY_BOUGHT
