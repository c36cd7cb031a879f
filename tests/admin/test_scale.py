"""Cost at scale: with 1,000,000 tasks and 10,000 held locks every page is <= 3 round trips.

Round trips are counted by wrapping redis-py's ``send_packed_command`` (a
pipeline is one call, so one call is one round trip); ``INFO commandstats``
on the real server shows which commands ran, so the test also proves that no
page uses ``KEYS`` or ``SCAN`` or reads whole sets.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import redis
from django.test import Client

from .conftest import BASE, Dashboard, dead_task, grant_many

TASKS = 1_000_000
LOCKS = 10_000
Q = BASE + "queues/default/big/"

#: Tasks the loader writes per call (each call is one script run, which blocks the server).
LOAD_CHUNK = 10_000
#: Writes the same structures as queue_enqueue.lua (pending zset + payload hash), a chunk a call.
LOADER = """
local base = tonumber(ARGV[3])
for i = tonumber(ARGV[1]), tonumber(ARGV[2]) do
  local id = string.format('task-%07d', i)
  redis.call('ZADD', KEYS[1], base + i, id)
  redis.call('HSET', KEYS[2], id, '{"order":' .. i .. ',"sku":"sku-' .. (i % 97) .. '"}')
end
return 1
"""


def command_name(packed: Any) -> str:
    """The first command's name in what redis-py sends (bytes or a list of byte chunks)."""
    data = b"".join(packed) if isinstance(packed, (list, tuple)) else bytes(packed)
    parts = data.split(b"\r\n")
    return parts[2].decode(errors="replace") if len(parts) > 2 else "?"


class CountedSends(list[int]):
    """``[count]``, with the command names counted and the connections opened."""

    def __init__(self, value: list[int]) -> None:
        super().__init__(value)
        self.names: list[str] = []
        #: connections the page opened (their handshakes are not counted as its requests)
        self.connects = 0


@contextmanager
def counting() -> Iterator[CountedSends]:
    """Count the requests the page sends (one per command, one per pipeline).

    Only this thread's and the threads started while counting (a page reads Redis in
    threads of its own, see metrics/deadline.py) count: a thread left running by an earlier
    test in this process (a watchdog, a heartbeat) is not the page's cost, yet on a loaded
    machine it can send inside the window. ``sent.names`` lists what was counted, for the
    failure message.
    """
    sent = CountedSends([0])
    before = set(threading.enumerate()) - {threading.current_thread()}
    connection = redis.connection.AbstractConnection
    original, original_connect = connection.send_packed_command, connection.connect
    opening = threading.local()

    def send(self: Any, command: Any, check_health: bool = True) -> None:
        if threading.current_thread() not in before and not getattr(opening, "on", False):
            sent[0] += 1
            sent.names.append(command_name(command))
        original(self, command, check_health)

    def connect(self: Any) -> None:
        # A page that finds no idle connection opens one (on a loaded machine an earlier
        # page's read can outlive its deadline and keep its own): its handshake (HELLO,
        # CLIENT SETINFO, ...) is the pool's cost, counted apart.
        if threading.current_thread() not in before:
            sent.connects += 1
        opening.on = True
        try:
            original_connect(self)
        finally:
            opening.on = False

    connection.send_packed_command = send  # type: ignore[method-assign]
    connection.connect = connect  # type: ignore[method-assign]
    try:
        yield sent
    finally:
        connection.send_packed_command = original  # type: ignore[method-assign]
        connection.connect = original_connect  # type: ignore[method-assign]


def commands(raw: Any) -> dict[str, int]:
    stats = raw.info("commandstats")
    return {name.removeprefix("cmdstat_"): int(v["calls"]) for name, v in stats.items()}


def server_micros(raw: Any) -> int:
    """Microseconds the server has spent running commands since the last ``RESETSTAT``."""
    return sum(int(v["usec"]) for v in raw.info("commandstats").values())


#: Most server time one page may take. A page that walked the million tasks (a plain
#: ZRANGE of the whole zset takes about 30 ms, a Lua loop over it far more) would exceed
#: it; a page that reads one window takes under 3 ms. Server time, unlike the page's wall
#: time, hardly grows with the load of other jobs on the machine.
PAGE_SERVER_MS = 20


@pytest.mark.slow
def test_every_page_costs_at_most_four_round_trips(single: Dashboard, admin_client: Client) -> None:
    raw = single.target.raw
    q = single.queue("big")
    dead_task(q, "dead-1", error="boom")
    started = time.monotonic()
    now_us = int(time.time() * 1e6) - TASKS - 10_000_000
    # 10,000 a call: a call of 50,000 ran past the client's 5 s socket timeout at load ~30,
    # and the client's resend met BUSY (the first run still going)
    for first in range(0, TASKS, LOAD_CHUNK):
        raw.eval(LOADER, 2, q.keys[0], q.keys[3], first, first + LOAD_CHUNK - 1, now_us)
    single.queues.register_queue("big")
    q.enqueue("later", {"n": 1}, delay=3600)
    q.pop(5)  # five in flight
    grant_many(single.locks, [f"lock:{i:05d}" for i in range(LOCKS)], ttl=600)
    assert raw.zcard(q.keys[0]) == TASKS - 5 + 1 and single.locks.held_lock_count() == LOCKS
    built = time.monotonic() - started
    middle = raw.zrange(q.keys[0], 500_000, 500_000, withscores=True)[0]
    middle_query = f"?state=ready&after={int(middle[1])}&id={middle[0].decode()}"
    job = q.get("task-0700000")
    pages = {
        "overview": (BASE, 4),  # lock index, queue list, queue summaries, workers count
        "locks": (BASE + "locks/?alias=default", 2),
        "locks, filtered, page 2": (
            BASE + "locks/?alias=default&prefix=lock:05&after=lock:05049",
            2,
        ),
        "locks, filtered, page before it": (
            BASE + "locks/?alias=default&prefix=lock:05&before=lock:05050",
            2,
        ),
        "queue, first page": (Q, 1),
        "queue, page after task 500,000": (Q + middle_query, 1),
        "queue, page before it": (Q + middle_query.replace("after", "before"), 1),
        "queue, last page": (Q + "?state=ready&last=1", 1),
        "queue, delayed / in flight / dead": (Q + "?state=dead", 1),
        "queue, exact-id search": (Q + "?q=task-0999999", 2),
        "task detail": (Q + "tasks/task-0700000/", 1),
        "release confirmation": (BASE + "locks/default/lock%3A00042/release/", 2),
        "delete confirmation": (Q + "tasks/task-0700000/delete/", 1),
        "purge confirmation": (Q + "purge/", 1),
    }
    for url, _ in pages.values():  # load the scripts and open the connections
        assert admin_client.get(url).status_code == 200, url
    raw.config_resetstat()
    report = []
    slow: dict[str, float] = {}
    for label, (url, budget) in pages.items():
        before = server_micros(raw)
        with counting() as sent:
            response = admin_client.get(url)
        server_ms = (server_micros(raw) - before) / 1000
        assert response.status_code == 200, url
        report.append(
            f"{label}: {sent[0]} round trip(s) ({sent.connects} connection(s) opened), "
            f"{server_ms:.1f} ms of server time"
        )
        names = " ".join(sent.names)
        assert sent[0] <= budget, f"{report[-1]}: {names}"
        if server_ms >= PAGE_SERVER_MS:
            slow[label] = server_ms
    ran = commands(raw)
    # A page that scans is slow every time; one preempted on a busy machine (CI recorded the
    # locks page at 29.6 ms once) is not: the least of three loads is the page's cost.
    for label, first_ms in slow.items():
        costs = [first_ms]
        for _ in range(2):
            before = server_micros(raw)
            assert admin_client.get(pages[label][0]).status_code == 200
            costs.append((server_micros(raw) - before) / 1000)
        assert min(costs) < PAGE_SERVER_MS, f"{label}: {costs} ms of server time"
    assert not {"keys", "scan", "hgetall", "hkeys", "hvals"} & set(ran), ran
    # a script per lock bucket on 5 pages; the rates script rides in the overview's and the
    # queue pages' pipelines, and the flow, task-function and day/week scripts in the queue
    # pages' (one round trip still)
    assert ran["evalsha"] <= 16 * 5 + 4 * len(pages), ran
    html = admin_client.get(Q + middle_query).content.decode()
    assert "rows 500,002\N{EN DASH}500,051 of 999,995" in html and job is not None
    assert 'Ready<span class="count">999,995</span>' in html
    print(f"\nbuilt {TASKS} tasks and {LOCKS} locks in {built:.1f} s\n" + "\n".join(report))
    raw.flushall()
