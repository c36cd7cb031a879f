"""Per task function numbers and the day and week charts on the queue page (issue 28).

The worker tallies each function's runs, failures and runtimes in memory and
adds them once a second to the queue's function buckets (``fnstats_add``, in the
batch with its counters); the queue page reads them in its one pipeline with the
day and week, downsampled from the minute rates in Redis.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from html import unescape
from typing import Any

from django.test import Client

from django_redislock import task
from django_redislock.calls.batch import Batch
from django_redislock.queue import fnstats
from django_redislock.queue.fnstats import Tally, bin_of
from django_redislock.queue.rates import read_long
from django_redislock.queue.worker import Worker

from .conftest import BASE, Dashboard

Q = BASE + "queues/default/orders/"
HOSTILE = "<script>alert('fn')</script>"


class CardDeclined(Exception):
    pass


@task(queue="orders", name="shop.tasks.charge", max_attempts=1)
def charge(n: int) -> None:
    time.sleep(0.02)
    if n % 4 == 0:
        raise CardDeclined(f"order {n}")


@task(queue="orders", name="shop.tasks.mail")
def mail(n: int) -> None:
    """Fast and never failing."""


def send(queue: Any, tallies: dict[str, Tally]) -> None:
    """What a worker's outcome batch sends for these tallies."""
    batch = Batch(queue.backend.client)
    fnstats.add_to_pipeline(batch, queue, tallies)
    batch.execute()


def tally(runs: Sequence[tuple[float | None, bool]]) -> Tally:
    out = Tally()
    for runtime, failed in runs:
        out.add(runtime, failed)
    return out


def function_rows(html: str) -> dict[str, list[str]]:
    table = html.split('class="summary task-functions"', 1)[1].split("</table>", 1)[0]
    rows = {}
    for row in re.findall(r'<tr class="function[^"]*">(.*?)</tr>', table, re.S):
        name = unescape(re.sub(r"<[^>]+>", "", row.split("</th>", 1)[0])).strip()
        rows[name] = re.findall(r'<td class="numeric">([^<]*)</td>', row)
    return rows


def test_worker_runs_give_counts_failure_rate_and_percentiles(
    dashboard: Dashboard, admin_client: Client
) -> None:
    q = dashboard.queue()
    q.enqueue_many([(f"c{i}", charge.payload([i], None)) for i in range(1, 9)])
    q.enqueue_many([(f"m{i}", mail.payload([i], None)) for i in range(5)])
    Worker([q], batch=20, burst=True).run()
    stats = {s.name: s for s in fnstats.read(q)}
    assert set(stats) == {"shop.tasks.charge", "shop.tasks.mail"}
    charged = stats["shop.tasks.charge"]
    assert (charged.hour.runs, charged.hour.failed, charged.hour.timed) == (8, 2, 8)
    assert (charged.day.runs, charged.day.failed) == (8, 2)
    assert charged.hour.failure_rate == 0.25
    # each run slept 20 ms: a bin's middle is within 9 % of any runtime in it
    assert charged.hour.p50 is not None and charged.hour.p50 >= 0.02 / 1.1
    assert stats["shop.tasks.mail"].hour.runs == 5 and stats["shop.tasks.mail"].hour.failed == 0
    html = admin_client.get(Q).content.decode()
    rows = function_rows(html)
    assert rows["shop.tasks.charge"][:3] == ["8", "2", "25.0 %"]
    assert rows["shop.tasks.charge"][5:8] == ["8", "2", "25.0 %"]
    assert rows["shop.tasks.mail"][:3] == ["5", "0", "0.0 %"]
    # each function links to its recent runs
    assert f'href="{Q}runs/?function=shop.tasks.charge"' in html
    live = admin_client.get(Q, {"live": "1"}).json()["regions"]["queue-trends"]
    assert "shop.tasks.charge" in live and "task-functions" in live


def test_percentiles_from_the_histogram(dashboard: Dashboard) -> None:
    q = dashboard.queue()
    runs = [(0.001, False)] * 90 + [(1.0, True)] * 10
    send(q, {"shop.tasks.slow_tail": tally(runs), "shop.tasks.untimed": tally([(None, True)])})
    send(q, {"shop.tasks.slow_tail": tally([(0.001, False)] * 100)})  # a second flush adds up
    stats = {s.name: s for s in fnstats.read(q)}
    hour = stats["shop.tasks.slow_tail"].hour
    assert (hour.runs, hour.failed, hour.timed) == (200, 10, 200)
    assert hour.p50 is not None and abs(hour.p50 - 0.001) / 0.001 < 0.1
    assert hour.p95 is not None and abs(hour.p95 - 0.001) / 0.001 < 0.1  # 190 of 200 at 1 ms
    send(q, {"shop.tasks.slow_tail": tally([(1.0, True)] * 100)})
    hour = {s.name: s for s in fnstats.read(q)}["shop.tasks.slow_tail"].hour
    assert hour.p50 is not None and abs(hour.p50 - 0.001) / 0.001 < 0.1  # 190 of 300
    assert hour.p95 is not None and abs(hour.p95 - 1.0) < 0.1
    untimed = stats["shop.tasks.untimed"].hour
    assert (untimed.runs, untimed.failed, untimed.p50, untimed.p95) == (1, 1, None, None)


def test_names_are_capped_per_slot_and_escaped(dashboard: Dashboard, admin_client: Client) -> None:
    q = dashboard.queue()
    q.enqueue("t1", None)  # the queue exists
    names = {f"app.tasks.f{i:02d}": tally([(0.01, False)]) for i in range(fnstats.NAMES + 5)}
    send(q, {HOSTILE: tally([(0.01, True)]), **names})
    stats = {s.name: s for s in fnstats.read(q)}
    assert len(stats) == fnstats.NAMES + 1 and stats["(other)"].hour.runs == 6
    html = admin_client.get(Q).content.decode()
    assert HOSTILE not in html and "&lt;script&gt;alert(&#x27;fn&#x27;)&lt;/script&gt;" in html
    raw = dashboard.target.raw
    # a slot: its bucket, its names and one field per function (the histogram in it)
    assert raw.hlen(q.fnstats_key) == 2 * (2 + fnstats.NAMES + 1)


def test_an_old_slot_is_cleared_when_its_time_comes_round(single: Dashboard) -> None:
    q = single.queue()
    raw = single.target.raw
    now = int(raw.time()[0])
    # what the hash would hold had a worker written this five-minute slot an hour ago
    slot = f"h{(now // 300) % 12}"
    old = {slot: now // 300 - 12, f"{slot}:f": "shop.tasks.gone\nshop.tasks.old\n"}
    old |= {f"{slot}:1": "[50,5,60,50]", f"{slot}:2": "[7,0,61,7]"}
    raw.hset(q.fnstats_key, mapping=old)
    assert "shop.tasks.gone" not in {s.name for s in fnstats.read(q)}  # stale: not counted
    send(q, {"shop.tasks.new": tally([(0.01, False)])})
    fields = {k.decode() for k in raw.hkeys(q.fnstats_key)}
    assert f"{slot}:2" not in fields  # cleared, not left behind
    assert raw.hget(q.fnstats_key, f"{slot}:f") == b"shop.tasks.new\n"
    assert raw.hget(q.fnstats_key, f"{slot}:1") == f"[1,0,{bin_of(0.01)},1]".encode()
    (new,) = fnstats.read(q)
    assert (new.name, new.hour.runs, new.day.runs) == ("shop.tasks.new", 1, 1)
    assert raw.pttl(q.fnstats_key) > 0


def test_day_and_week_charts(dashboard: Dashboard, admin_client: Client) -> None:
    q = dashboard.queue()
    q.enqueue_many([(f"t{i}", None) for i in range(7)])
    long = read_long(q)
    assert long.total("day", "enqueued") == 7 and long.total("week", "enqueued") == 7
    assert len(long.counts["day"]["enqueued"]) == 96 and len(long.counts["week"]["enqueued"]) == 84
    html = admin_client.get(Q).content.decode()
    charts = html.split("The last day and week", 1)[1].split("</table>", 1)[0]
    assert charts.count('<svg class="rate-bars-long"') == 10
    enqueued = charts.split('class="long-enqueued"', 1)[1].split("</tr>", 1)[0]
    assert re.findall(r'class="numeric">([\d,]+)<', enqueued) == ["7", "7"]
    assert re.search(r"<title>\w{3} \d\d \w{3} \d\d:\d\d UTC: 7 enqueued</title>", enqueued)


def test_a_minute_is_rolled_up_once_when_its_slot_is_reused(single: Dashboard) -> None:
    q = single.queue()
    raw = single.target.raw
    now = int(raw.time()[0])
    minute = now // 60
    # the minute slot as an enqueue 60 minutes ago left it (the hour ring no longer shows it)
    slot = f"m{minute % 60}"
    raw.hset(q.rates_key, mapping={slot: minute - 60, f"{slot}:enqueued": 40, f"{slot}:failed": 3})
    before = read_long(q)
    assert before.total("day", "enqueued") == 40 and before.total("week", "failed") == 3
    q.enqueue("now", None)  # reuses the slot: its old minute goes to the day and week rings
    after = read_long(q)
    assert after.total("day", "enqueued") == 41 and after.total("week", "enqueued") == 41
    assert after.total("day", "failed") == 3  # moved, not counted twice
    fields = {k.decode() for k in raw.hkeys(q.rates_key)}
    assert f"q{((minute - 60) * 60 // 900) % 96}" in fields
    assert raw.hget(q.rates_key, f"{slot}:enqueued") == b"1"
    # bounded: a day's and a week's slots at most, whatever the queue does
    assert len([f for f in fields if f[0] in "qw" and ":" not in f]) <= 96 + 84
