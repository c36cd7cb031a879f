"""Every finished run in the queue's recent runs: first successes too (issue 28, Build 3).

The recent-runs list read the task history, which records failed runs and the
success that ends a run of failures: a task that succeeded at its first run left
no trace, so the list lacked most successes. The run log (``queue/runlog.py``)
records every end of a run (success, retry, dead letter, cancel, expiry) in two
capped lists per queue, written in the calls that end the runs.
"""

from __future__ import annotations

import re
import time
import uuid
from collections import Counter
from datetime import datetime, timedelta
from datetime import timezone as dt_timezone
from typing import Any

import pytest
from django.test import Client

from django_redislock import task
from django_redislock.calls.batch import Batch
from django_redislock.exceptions import Retry
from django_redislock.queue import fnstats, runlog
from django_redislock.queue.history import worker_id
from django_redislock.queue.worker import Worker

from .conftest import BASE, Dashboard

Q = BASE + "queues/default/orders/"
RUNS = Q + "runs/"
SEEN: set[str] = set()


@task(queue="orders", name="shop.tasks.ok")
def ok(key: str) -> str:
    return key


@task(queue="orders", name="shop.tasks.boom", max_attempts=1)
def boom(key: str) -> None:
    raise LookupError(f"no {key}")


@task(queue="orders", name="shop.tasks.again", max_attempts=3)
def again(key: str) -> None:
    if key not in SEEN:
        SEEN.add(key)
        raise Retry("not yet", countdown=0)


def rows(html: str) -> list[tuple[str, str]]:
    """(task id, outcome) of each row of the runs table."""
    body = html.split('id="run-rows">', 1)[1].split("</tbody>", 1)[0]
    return re.findall(
        r'<th scope="row" class="name"><a href="[^"]+">([^<]+)</a></th>\s*'
        r"<td[^>]*>.*?</td>\s*<td>([a-z]+)</td>",
        body,
        re.S,
    )


def drain(queue: Any) -> None:
    Worker([queue], batch=10, burst=True).run()


def test_every_end_of_a_run_is_listed_and_searched(
    dashboard: Dashboard, admin_client: Client
) -> None:
    q = dashboard.queue()
    SEEN.discard("f")
    for key in ("o1", "o2", "o3"):
        q.enqueue(key, ok.payload([key], None))
    q.enqueue("b1", boom.payload(["sku"], None))
    q.enqueue("f1", again.payload(["f"], None))
    q.enqueue("c1", ok.payload(["c"], None), delay=3600)
    assert q.cancel("c1") == "removed"
    q.enqueue("e1", {**ok.payload(["e"], None), "expires": time.time() - 1})
    drain(q)
    html = admin_client.get(RUNS).content.decode()
    assert Counter(rows(html)) == Counter(
        [
            ("o1", "succeeded"),
            ("o2", "succeeded"),
            ("o3", "succeeded"),
            ("b1", "dead"),
            ("f1", "retried"),
            ("f1", "succeeded"),
            ("c1", "cancelled"),
            ("e1", "expired"),
        ]
    )
    assert "8 of 8 runs match" in html
    first = rows(admin_client.get(RUNS, {"function": "shop.tasks.ok"}).content.decode())
    assert sorted(first) == [("e1", "expired"), *[(k, "succeeded") for k in ("o1", "o2", "o3")]]
    wins = rows(admin_client.get(RUNS, {"outcome": "succeeded"}).content.decode())
    assert sorted(wins) == [("f1", "succeeded"), *[(k, "succeeded") for k in ("o1", "o2", "o3")]]
    assert rows(admin_client.get(RUNS, {"error": "LookupError"}).content.decode()) == [
        ("b1", "dead")
    ]
    host = worker_id().rsplit(":", 1)[0]
    assert len(rows(admin_client.get(RUNS, {"worker": host}).content.decode())) == 8
    assert rows(admin_client.get(RUNS, {"worker": "no-such-host"}).content.decode()) == []
    later = (datetime.now(dt_timezone.utc) + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M")
    assert rows(admin_client.get(RUNS, {"since": later}).content.decode()) == []
    assert len(rows(admin_client.get(RUNS, {"until": later}).content.decode())) == 8
    found = {run.id: run for run in runlog.read(q).runs if run.outcome == "succeeded"}
    assert found["o1"].runtime is not None and found["o1"].worker == worker_id()
    assert found["o1"].function == "shop.tasks.ok" and found["o1"].attempt == 1


def successes(n: int, prefix: str) -> list[runlog.Success]:
    now = time.monotonic()
    return [(f"{prefix}{i}", 1, 0.001, "shop.tasks.ok", False, now) for i in range(n)]


def test_the_log_is_capped_and_expires_and_successes_never_push_failures_out(
    dashboard: Dashboard, admin_client: Client
) -> None:
    q = dashboard.queue()
    q.enqueue("b1", boom.payload(["x"], None))
    drain(q)
    batch = Batch(q.backend.client)
    runlog.add_to_pipeline(batch, q, successes(runlog.KEEP + 200, "s"))
    assert batch.execute(resend="missing") == [runlog.KEEP]  # only the list's worth was sent
    client = q.backend.client
    assert client.llen(q.runs_ok_key) == runlog.KEEP
    assert 0 < client.pttl(q.runs_ok_key) <= 7 * 86400 * 1000
    assert 0 < client.pttl(q.runs_failed_key) <= 7 * 86400 * 1000
    page = runlog.read(q)
    assert (page.kept, page.matched) == (runlog.KEEP + 1, runlog.KEEP + 1)
    assert page.runs[0].id == f"s{runlog.KEEP + 199}"  # the newest first
    assert [run.id for run in page.runs if run.outcome != "succeeded"] == ["b1"]
    dead = admin_client.get(RUNS, {"outcome": "dead"}).content.decode()
    assert rows(dead) == [("b1", "dead")]
    last = admin_client.get(RUNS, {"page": "21"}).content.decode()
    assert "page 21 of 21" in last and len(rows(last)) == 1


def test_the_log_agrees_with_the_function_table(dashboard: Dashboard, db: None) -> None:
    q = dashboard.queue()
    for i in range(7):
        q.enqueue(f"o{i}", ok.payload([f"o{i}"], None))
    for i in range(3):
        q.enqueue(f"b{i}", boom.payload([f"b{i}"], None))
    for i in range(2):
        q.enqueue(f"a{i}", again.payload([f"agree-{uuid.uuid4().hex}"], None))
    drain(q)
    logged: Counter[tuple[str, bool]] = Counter(
        (run.function, run.outcome != "succeeded") for run in runlog.read(q).runs
    )
    table = {s.name: (s.hour.runs, s.hour.failed, s.day.runs) for s in fnstats.read(q)}
    for name in ("shop.tasks.ok", "shop.tasks.boom", "shop.tasks.again"):
        runs = logged[name, False] + logged[name, True]
        assert table[name] == (runs, logged[name, True], runs), name
    assert table["shop.tasks.ok"][:2] == (7, 0)
    assert table["shop.tasks.boom"][:2] == (3, 3)
    assert table["shop.tasks.again"][:2] == (4, 2)


@pytest.mark.parametrize("kind", ["succeeded", "dead"])
def test_memory_of_a_full_log(single: Dashboard, kind: str) -> None:
    """A full list's bytes (MEMORY USAGE, on a real server): the cap docs/admin.md states."""
    q = single.queue()
    client = q.backend.client
    if kind == "succeeded":
        batch = Batch(client)
        runs = [
            (uuid.uuid4().hex, 1, 0.0123, "shop.tasks.create_order", False, time.monotonic())
            for _ in range(runlog.KEEP)
        ]
        runlog.add_to_pipeline(batch, q, runs)
        batch.execute(resend="missing")
        key, bound = q.runs_ok_key, 256 * 1024
    else:
        error = "shop.errors.PaymentDeclined: " + "the bank said no " * 200
        for i in range(runlog.KEEP):
            q.enqueue(f"d{i}", boom.payload(["x"], None))
        claimed = q.pop(runlog.KEEP)
        for one in claimed:
            q.retry(one, delay=0, error=error, max_attempts=1, runtime=0.5)
        key, bound = q.runs_failed_key, 512 * 1024
    assert client.llen(key) == runlog.KEEP
    used = int(client.memory_usage(key, samples=0))
    print(f"{kind}: {used} bytes for {runlog.KEEP} runs ({used / runlog.KEEP:.0f} B/run)")
    assert used <= bound
