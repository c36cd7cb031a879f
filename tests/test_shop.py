"""The example shop in-process: the buy view, order tasks, paying, expiry, restocking, admin.

Runs on the real single server and the real cluster (the shop uses locks, the queue
and the inventory together).
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client, override_settings
from shop import tasks
from shop.models import Order, Product, Sale
from shop.services import open_sale, pay_order, restock

from django_redislock.exceptions import ConfigurationError
from django_redislock.queue.worker import Worker

from .conftest import RedisTarget
from .servers import closed_port

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(params=["single", "cluster"])
def shop_redis(request: pytest.FixtureRequest) -> Iterator[RedisTarget]:
    target: RedisTarget = request.getfixturevalue(f"{request.param}_target")
    params = {**target.params(), "KEY_PREFIX": "test"}
    aliases = {"default": params}
    with override_settings(
        REDISLOCK_LOCKS=aliases, REDISLOCK_QUEUES=aliases, ROOT_URLCONF="shopsite.urls"
    ):
        yield target


def new_sale(units: int, **kwargs: Any) -> Sale:
    product = Product.objects.create(name="Phone X", price=Decimal("999.00"))
    return open_sale(product, units, **kwargs)


def drain() -> int:
    """Run every due task of the orders queue in this process; how many ran."""
    summary = Worker([tasks.create_order.queue], burst=True, timeout=20).run()
    assert summary.failed == 0
    return summary.processed


def buy(client: Client, sale: Sale, buyer: str, qty: int = 1) -> Any:
    return client.post(f"/sale/{sale.pk}/buy", {"buyer": buyer, "qty": qty})


def test_buy_answers_at_once_and_the_worker_writes_orders(shop_redis: RedisTarget) -> None:
    sale = new_sale(2)
    client = Client()
    first = buy(client, sale, "alice")
    assert first.status_code == 202
    assert first.json()["result"] == "ok" and first.json()["remaining"] == 1
    again = buy(client, sale, "alice")
    assert (again.status_code, again.json()["result"]) == (409, "already_bought")
    assert buy(client, sale, "bob").status_code == 202
    sold_out = buy(client, sale, "carol")
    assert (sold_out.status_code, sold_out.json()["result"]) == (409, "sold_out")
    assert client.get(f"/sale/{sale.pk}/stock.json").json()["remaining"] == 0
    assert Order.objects.count() == 0  # nothing written on the request path
    assert drain() == 2
    orders = {o.buyer: o for o in Order.objects.all()}
    assert set(orders) == {"alice", "bob"}
    assert orders["alice"].number == first.json()["order"]
    assert all(o.status == Order.PENDING for o in orders.values())
    expiry = tasks.expire_order.queue.get(tasks.expiry_id(orders["bob"].number))
    assert expiry is not None and expiry.state == "delayed"
    page = client.get(f"/sale/{sale.pk}/")
    assert page.status_code == 200 and b"Buy now" in page.content
    assert client.get(f"/order/{orders['bob'].number}.json").json()["status"] == "pending"


def test_buy_refuses_bad_input_and_unknown_sales(shop_redis: RedisTarget) -> None:
    sale = new_sale(5)
    client = Client()
    assert buy(client, sale, "").status_code == 400
    assert buy(client, sale, "a", qty=0).status_code == 400
    assert client.post(f"/sale/{sale.pk}/buy", {"buyer": "a", "qty": "x"}).status_code == 400
    assert client.post("/sale/999999/buy", {"buyer": "a"}).status_code == 404
    assert client.get(f"/sale/{sale.pk}/buy").status_code == 405
    assert sale.stock.remaining() == 5


def test_a_sale_that_has_not_opened(shop_redis: RedisTarget) -> None:
    from django.utils import timezone

    sale = new_sale(5, opens=timezone.now() + timedelta(hours=1))
    response = buy(Client(), sale, "early")
    assert (response.status_code, response.json()["result"]) == (409, "not_open")


def test_order_creation_is_idempotent(shop_redis: RedisTarget) -> None:
    sale = new_sale(3)
    take = sale.stock.take(buyer="dave", data={"sale": sale.pk})
    assert take.reservation is not None
    payload = take.reservation.as_dict()
    numbers = {tasks.create_order(payload) for _ in range(3)}
    assert numbers == {take.reservation.id}
    assert Order.objects.count() == 1
    drain()  # the queued copy of the same task
    assert Order.objects.count() == 1
    assert tasks.expire_order.queue.stats()["delayed"] == 1


def test_unpaid_orders_expire_and_return_their_units(shop_redis: RedisTarget) -> None:
    # 2.5 s to pay: room for a slow first drain (its burst must end before an expiry is due)
    sale = new_sale(2, pay_within=timedelta(seconds=2.5))
    client = Client()
    paid_number = buy(client, sale, "payer").json()["order"]
    unpaid_number = buy(client, sale, "forgetful").json()["order"]
    drain()
    assert sale.stock.remaining() == 0
    paid = client.post(f"/order/{paid_number}/pay")
    assert (paid.status_code, paid.json()["status"]) == (200, "paid")
    assert tasks.expire_order.queue.get(tasks.expiry_id(paid_number)) is None
    expiry = tasks.expire_order.queue.get(tasks.expiry_id(unpaid_number))
    deadline = time.monotonic() + 10
    while expiry is not None and expiry.state != "ready" and time.monotonic() < deadline:
        time.sleep(0.05)  # until the unpaid order's expiry is due
        expiry = tasks.expire_order.queue.get(tasks.expiry_id(unpaid_number))
    assert drain() == 1  # only the unpaid order's expiry was left
    assert Order.objects.get(number=unpaid_number).status == Order.EXPIRED
    assert Order.objects.get(number=paid_number).status == Order.PAID
    assert sale.stock.remaining() == 1
    late = client.post(f"/order/{unpaid_number}/pay")
    assert (late.status_code, late.json()["status"]) == (409, "expired")
    # a stray expiry of a paid order (e.g. it was already running) changes nothing
    assert tasks.expire_order(paid_number) == Order.PAID
    assert tasks.expire_order(unpaid_number) == Order.EXPIRED  # rerun: restore is a no-op
    assert sale.stock.remaining() == 1
    assert buy(client, sale, "forgetful").status_code == 202  # may buy again


def test_a_restored_unit_is_never_ordered_twice(shop_redis: RedisTarget) -> None:
    sale = new_sale(1)
    client = Client()
    first = buy(client, sale, "alice").json()["order"]
    queue = tasks.create_order.queue
    [claimed] = queue.pop()  # the order task fails until it is dead-lettered
    assert queue.retry(claimed, error="database down", max_attempts=1) == "dead"
    assert sale.stock.restore(first)  # an operator gives the unit back
    second = buy(client, sale, "bob").json()["order"]  # and it is sold again
    assert queue.requeue_dead() == 0  # the dead order task went with the reservation
    # even a copy of the first order task that runs anyway (queued again from a saved
    # payload, or already running when the restore came) orders nothing
    payload = claimed.payload
    queue.enqueue(first, payload)
    drain()
    assert [o.number for o in Order.objects.all()] == [second]
    assert tasks.create_order(*payload["args"], **payload["kwargs"]) == "not-live"
    assert Order.objects.count() == 1 and sale.stock.remaining() == 0


def test_restock_adds_to_redis_and_the_database(shop_redis: RedisTarget) -> None:
    sale = new_sale(1)
    assert restock(sale.pk, 4) == 5
    sale.refresh_from_db()
    assert sale.units == 5 and sale.stock.stats().remaining == 5
    with pytest.raises(Sale.DoesNotExist):
        restock(999999, 1)


def test_an_order_for_a_deleted_sale_gives_the_unit_back(shop_redis: RedisTarget) -> None:
    sale = new_sale(1)
    stock = sale.stock
    take = stock.take(buyer="x", data={"sale": sale.pk})
    assert take.reservation is not None
    sale.delete()
    assert drain() == 1
    assert Order.objects.count() == 0
    assert stock.remaining() == 1 and stock.reservation(take.reservation.id) is None


def test_pay_is_refused_for_an_expired_order(shop_redis: RedisTarget) -> None:
    sale = new_sale(1)
    take = sale.stock.take(buyer="e", data={"sale": sale.pk})
    assert take.reservation is not None
    tasks.create_order(take.reservation.as_dict())
    number = take.reservation.id
    assert tasks.expire_order(number) == Order.EXPIRED
    assert pay_order(number) == Order.EXPIRED
    assert sale.stock.remaining() == 1


def test_admin_pages_list_sales_and_orders(shop_redis: RedisTarget) -> None:
    sale = new_sale(2)
    sale.stock.take(buyer="f", data={"sale": sale.pk})
    drain()
    User.objects.create_superuser("admin", "admin@example.com", "admin")
    client = Client()
    client.force_login(User.objects.get(username="admin"))
    sales = client.get("/admin/shop/sale/")
    assert sales.status_code == 200 and b"Left (Redis)" in sales.content
    assert client.get("/admin/shop/order/").status_code == 200
    response = client.post(
        "/admin/shop/sale/", {"action": "restock_ten", "_selected_action": [sale.pk]}, follow=True
    )
    assert response.status_code == 200
    assert sale.stock.remaining() == 11


# -- the shop's edges: framing, buyer identity, Redis down --------------------------------


def test_no_page_of_the_shop_site_may_be_framed(shop_redis: RedisTarget) -> None:
    from shopsite.settings import base

    sale = new_sale(2)
    admin = User.objects.create_superuser("framer", "f@example.com", "pw")
    with override_settings(MIDDLEWARE=base.MIDDLEWARE, X_FRAME_OPTIONS=base.X_FRAME_OPTIONS):
        assert Client().get(f"/sale/{sale.pk}/")["X-Frame-Options"] == "DENY"
        client = Client()
        client.force_login(admin)
        dashboard = client.get("/admin/django_redislock/dashboard/")
        assert dashboard.status_code == 200 and dashboard["X-Frame-Options"] == "DENY"


def test_an_anonymous_buyer_cannot_be_a_user(shop_redis: RedisTarget) -> None:
    sale = new_sale(5)
    user = User.objects.create_user("one", password="pw")
    anonymous = buy(Client(), sale, str(user.pk))
    assert anonymous.status_code == 202  # "1" is a name like any other...
    signed_in = Client()
    signed_in.force_login(user)
    mine = signed_in.post(f"/sale/{sale.pk}/buy", {"qty": 1})
    assert mine.status_code == 202, mine.json()  # ...and not the user with pk 1
    forged = buy(Client(), sale, f"user:{user.pk}")
    assert forged.status_code == 400 and "signed-in users" in forged.json()["error"]
    assert sale.stock.remaining() == 3


def test_redis_down_gives_json_503s_and_admin_messages(shop_redis: RedisTarget) -> None:
    sale = new_sale(2)
    admin = User.objects.create_superuser("boss", "b@example.com", "pw")
    take = sale.stock.take(buyer="g", data={"sale": sale.pk})
    drain()
    order = Order.objects.get()
    assert take.reservation is not None
    down = {"default": {"LOCATION": f"redis://127.0.0.1:{closed_port()}/0", "KEY_PREFIX": "test"}}
    with override_settings(REDISLOCK_LOCKS=down, REDISLOCK_QUEUES=down):
        client = Client()
        for response in (
            client.get(f"/sale/{sale.pk}/stock.json"),
            buy(client, sale, "h"),
            client.post(f"/order/{order.number}/pay"),
        ):
            assert response.status_code == 503 and response["Retry-After"] == "2"
            assert response.json()["error"] == "unavailable"
        page = client.get(f"/sale/{sale.pk}/")
        assert page.status_code == 503 and b"store unavailable" in page.content
        staff = Client()
        staff.force_login(admin)
        restocked = staff.post(
            "/admin/shop/sale/",
            {"action": "restock_ten", "_selected_action": [sale.pk]},
            follow=True,
        )
        assert restocked.status_code == 200 and b"not restocked" in restocked.content
        paid = staff.post(
            "/admin/shop/order/",
            {"action": "mark_paid", "_selected_action": [order.pk]},
            follow=True,
        )
        assert paid.status_code == 200 and b"not marked paid" in paid.content
    sale.refresh_from_db()
    order.refresh_from_db()
    assert sale.units == 2 and order.status == Order.PENDING  # nothing half-done


def test_the_dashboard_flash_sale_panel(shop_redis: RedisTarget) -> None:
    sale = new_sale(5)
    for buyer in ("p", "q"):
        assert sale.stock.take(buyer=buyer, data={"sale": sale.pk}).ok
    admin = User.objects.create_superuser("watcher", "w@example.com", "pw")
    client = Client()
    client.force_login(admin)
    panel_url = "/admin/django_redislock/dashboard/flash-sales/"
    unset = client.get(panel_url).content.decode()
    assert "No stocks to show: set REDISLOCK_ADMIN_STOCKS" in unset
    with override_settings(REDISLOCK_ADMIN_STOCKS="shop.panel.live_stocks"):
        assert (
            'id="sales-link"' in client.get("/admin/django_redislock/dashboard/").content.decode()
        )
        html = client.get(panel_url).content.decode()
        row = html.split('id="sale-rows">', 1)[1].split("</tr>", 1)[0]
        cells = re.findall(r'<td class="numeric">(?:<strong>)?(\d+)', row)
        assert cells[:4] == ["3", "2", "0", "2"]  # left, taken, restored, buyers
        assert "Phone X x5" in row and ">open<" in row  # the sale's own label
        # the shared order queue is shown once, under the sales, not on every sale
        queues = html.split('id="sale-queues">', 1)[1].split("</tbody>", 1)[0]
        assert ">orders</a>" in queues and ">orders</a>" not in row
        queue_cells = re.findall(r'<td class="numeric">(?:<strong>)?(\d+)', queues)
        assert queue_cells[:2] == ["1", "2"]  # one sale feeds it, two order tasks ready
        # the order queue's rate: the two takes queued two orders this minute
        assert 'class="rate-spark"' in queues and "enqueued: 2 in the last hour" in queues
        live = client.get(panel_url, {"live": "1"}).json()["regions"]["sale-rows"]
        assert sale.stock.item in live
        sale.stock.take(buyer="r", data={"sale": sale.pk})
        again = client.get(panel_url, {"live": "1"}).json()["regions"]["sale-rows"]
        assert "<strong>2</strong>" in again
    with (
        override_settings(REDISLOCK_ADMIN_STOCKS="shop.panel.nothing_here"),
        pytest.raises(ConfigurationError, match="REDISLOCK_ADMIN_STOCKS"),
    ):
        client.get(panel_url)
