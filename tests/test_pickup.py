"""An idle worker's pickup is one round trip: its claim rides on its wait (queue/idle.py).

* The request that starts an idle wait carries the ``BLPOP`` and the claim's ``EVALSHA``;
  between an enqueue and the task's start the worker sends nothing more (before: the
  wake-up, then a claim: two round trips). Solo, thread and async pools; single, cluster.
* The claim behind the wait keeps its resend-safety: its reply or the wake-up's lost (the
  connection cut), the worker resends it with its request key and runs the task once,
  without waiting for its lease; ``NOSCRIPT`` behind a wait (a ``SCRIPT FLUSH``) costs a
  resend, not the task.
* A stop signal that lands while the wait's reply is on its way (the server already ran
  the claim) gives the claimed task back at once, uncharged.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from redis.connection import AbstractConnection

from django_redislock import task
from django_redislock.queue import Queue
from django_redislock.queue.stops import Interrupted
from django_redislock.queue.worker import Worker

from .conftest import RedisTarget
from .faults import Args, command_name
from .proxied import ProxiedTarget

pytestmark = pytest.mark.django_db(transaction=True)

#: What happened, in order: ("send", thread name, command names), ("run", tag) and, in a
#: pool, ("handed", task id) when the claim loop hands a task to a run.
EVENTS: list[tuple[Any, ...]] = []
_LOCK = threading.Lock()
WORKER_THREAD = "pickup-worker"
#: The start of each command in a packed request (RESP arrays of bulk strings).
COMMAND = re.compile(rb"\*\d+\r\n\$\d+\r\n([A-Za-z]+)\r\n")


@task(queue="pickup", name="tests.pickup.mark")
def mark(tag: str) -> None:
    with _LOCK:
        EVENTS.append(("run", tag))


@pytest.fixture(params=["single", "cluster"])
def target(request: pytest.FixtureRequest) -> RedisTarget:
    found: RedisTarget = request.getfixturevalue(f"{request.param}_target")
    return found


@contextmanager
def recorded_requests() -> Iterator[list[tuple[Any, ...]]]:
    """Record each request redis-py writes (thread, command names) into :data:`EVENTS`."""
    original = AbstractConnection.send_packed_command

    def recording(self: Any, command: Any, check_health: bool = True) -> None:
        chunks = [command] if isinstance(command, (bytes, str)) else command
        data = b"".join(c.encode() if isinstance(c, str) else bytes(c) for c in chunks)
        names = [name.upper().decode() for name in COMMAND.findall(data)]
        with _LOCK:
            EVENTS.append(("send", threading.current_thread().name, names))
        original(self, command, check_health)

    EVENTS.clear()
    AbstractConnection.send_packed_command = recording  # type: ignore[method-assign]
    try:
        yield EVENTS
    finally:
        AbstractConnection.send_packed_command = original  # type: ignore[method-assign]


def wait_for(condition: Any, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not met within {seconds:g} s")
        time.sleep(0.002)


def worker_sends(events: list[tuple[Any, ...]]) -> list[tuple[int, list[str]]]:
    return [(i, e[2]) for i, e in enumerate(events) if e[0] == "send" and e[1] == WORKER_THREAD]


@pytest.mark.parametrize("pool", ["solo", "thread", "async"])
def test_an_idle_workers_pickup_is_one_round_trip(target: RedisTarget, pool: str) -> None:
    q: Queue = target.queue_backend().queue("pickup")
    extra: dict[str, Any] = {} if pool == "solo" else {"concurrency": 2}
    worker = Worker([q], pool=pool, max_tasks=1, timeout=30, **extra)
    if worker._executor is not None:  # a pool's main thread hands the task over, then goes on
        submit_all = worker._executor.submit_all  # every pool's hand-over of a claim

        def handed_over(queue: Queue, claimed: list[Any], lease: float) -> None:
            with _LOCK:
                EVENTS.extend(("handed", task.id) for task in claimed)
            submit_all(queue, claimed, lease)

        worker._executor.submit_all = handed_over
    thread = threading.Thread(target=worker.run, name=WORKER_THREAD)
    with recorded_requests() as events:
        thread.start()
        # the worker claimed (nothing) and went idle: its wait's request is out
        wait_for(lambda: any("BLPOP" in names for _, names in worker_sends(events)))
        time.sleep(0.05)  # the request reaches the server: the wake-up is a push
        with _LOCK:
            events.append(("enqueue",))
        q.enqueue("t1", mark.payload(["t1"], None))
        thread.join(15)
    assert not thread.is_alive()
    enqueued = events.index(("enqueue",))
    ran = min(i for i, e in enumerate(events) if e in (("run", "t1"), ("handed", "t1")))
    before = [names for i, names in worker_sends(events) if i < enqueued]
    between = [names for i, names in worker_sends(events) if enqueued < i < ran]
    # the wait and the claim went out in one request, and nothing after the enqueue: one
    # round trip from the enqueue to the run (before: ['BLPOP'], then ['EVALSHA'] between)
    assert before[-1] == ["BLPOP", "EVALSHA"], before
    assert between == [], between
    assert worker.summary.succeeded == 1
    stats = q.stats()
    assert (stats["ready"], stats["in_flight"]) == (0, 0), stats


def test_a_worker_of_several_queues_carries_the_first_queues_claim(
    single_target: RedisTarget,
) -> None:
    backend = single_target.queue_backend()
    first, second = backend.queue("pickup"), backend.queue("pickup-2")
    worker = Worker([first, second], max_tasks=2, timeout=30)
    thread = threading.Thread(target=worker.run, name=WORKER_THREAD)
    with recorded_requests() as events:
        thread.start()
        wait_for(lambda: any("BLPOP" in names for _, names in worker_sends(events)))
        time.sleep(0.05)
        second.enqueue("b", mark.payload(["b"], None))  # woken by the second queue
        wait_for(lambda: ("run", "b") in events)
        time.sleep(0.05)
        first.enqueue("a", mark.payload(["a"], None))  # then by the first
        thread.join(15)
    assert not thread.is_alive()
    assert [e[1] for e in events if e[0] == "run"] == ["b", "a"]
    assert worker.summary.succeeded == 2


# -- lost replies, resends, NOSCRIPT ---------------------------------------------------------


def claim_of(q: Queue) -> Any:
    """The claim script's call on ``q`` (its request key names the queue)."""
    head = q.backend.key(f"q:{q.name}", "req:").encode()

    def match(args: Args) -> bool:
        return command_name(args) == b"EVALSHA" and any(arg.startswith(head) for arg in args)

    return match


def idle_worker(proxied: ProxiedTarget) -> tuple[Queue, Worker, threading.Thread]:
    """A solo worker of queue ``pickup`` behind the proxies, idle (its wait sent)."""
    backend = proxied.queue_backend(SOCKET_TIMEOUT=3.0, WORKER_GIVE_UP=30.0)
    q: Queue = backend.queue("pickup")
    worker = Worker([q], max_tasks=1, timeout=30, lease=60)
    thread = threading.Thread(target=worker.run, name=WORKER_THREAD)
    EVENTS.clear()
    thread.start()
    wait_for(lambda: proxied.count("BLPOP") >= 1)
    time.sleep(0.05)
    return q, worker, thread


@pytest.mark.parametrize("kind", ["single", "cluster"])
@pytest.mark.parametrize("lost", ["BLPOP", "EVALSHA"])
def test_a_pickup_whose_reply_is_lost_runs_its_task_once_and_at_once(
    kind: str, lost: str, request: pytest.FixtureRequest
) -> None:
    proxied: ProxiedTarget = request.getfixturevalue(f"proxied_{kind}")
    q, worker, thread = idle_worker(proxied)
    # the wake-up's reply, or the claim's behind it: the server ran both, the cut loses them
    match = "BLPOP" if lost == "BLPOP" else claim_of(q)
    faults = proxied.drop_reply(match, then="cut")
    q.enqueue("t1", mark.payload(["t1"], None))
    thread.join(20)
    assert not thread.is_alive()
    assert any(fault.fired.is_set() for fault in faults)
    # the resend answered what the lost claim took: run once, long before its 60 s lease
    assert [e for e in EVENTS if e == ("run", "t1")] == [("run", "t1")]
    assert worker.summary.succeeded == 1
    stats = q.stats()
    assert (stats["ready"], stats["in_flight"]) == (0, 0), stats


@pytest.mark.parametrize("kind", ["single", "cluster"])
def test_noscript_behind_a_wait_costs_a_resend_not_the_task(
    kind: str, request: pytest.FixtureRequest
) -> None:
    proxied: ProxiedTarget = request.getfixturevalue(f"proxied_{kind}")
    q, worker, thread = idle_worker(proxied)
    for raw in proxied.raw_clients():
        raw.script_flush()  # the claim behind the wait answers NOSCRIPT
    q.enqueue("t1", mark.payload(["t1"], None))
    thread.join(20)
    assert not thread.is_alive()
    assert EVENTS == [("run", "t1")]
    assert worker.summary.succeeded == 1


# -- a stop while the reply is on its way ----------------------------------------------------


@pytest.mark.parametrize("pool", ["solo", "thread"])
def test_a_stop_while_the_pickups_reply_is_on_its_way_gives_the_task_back(
    target: RedisTarget, pool: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    q: Queue = target.queue_backend().queue("pickup")
    extra: dict[str, Any] = {} if pool == "solo" else {"concurrency": 2}
    worker = Worker([q], pool=pool, timeout=30, lease=60, **extra)
    raw = target.raw
    original = AbstractConnection.can_read
    fired: list[bool] = []

    def signal_lands(self: Any, timeout: float = 0) -> bool:
        """The worker's wait: a task is enqueued, the server answers the wait (and runs the
        claim behind it), and a stop signal lands before the reply is read."""
        if threading.current_thread().name != WORKER_THREAD or fired or timeout < 0.5:
            return bool(original(self, timeout))
        fired.append(True)
        q.enqueue("t1", mark.payload(["t1"], None))
        wait_for(lambda: raw.llen(q.signal_key) == 0)  # the wake-up was popped
        worker.stop()  # what the handler of SIGTERM does, then it raises in the wait
        raise Interrupted

    monkeypatch.setattr(AbstractConnection, "can_read", signal_lands)
    EVENTS.clear()
    thread = threading.Thread(target=worker.run, name=WORKER_THREAD)
    thread.start()
    thread.join(20)
    assert not thread.is_alive() and fired
    assert EVENTS == []  # stopped: the task did not run
    stats = q.stats()
    # given back at once, not left in flight for its 60 s lease; no attempt charged
    assert (stats["ready"], stats["in_flight"]) == (1, 0), stats
    (found,) = q.claim(1, start=False).tasks
    assert (found.id, found.attempts, found.suspect) == ("t1", 1, False)
