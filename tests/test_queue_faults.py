"""Queue and inventory calls whose reply is lost, or lost and resent, through the fault proxy.

Each case runs the same call twice on twin queues (or stocks) of the same
server, prepared alike: once with no fault (the control), once with the
call's reply dropped after Redis ran it. Afterwards the faulted twin must hold
what the control holds (same tasks in the same states, same attempts, same
payloads; same units taken and orders queued): the call ran once. With a
client that resends (a redis-py ``Retry`` in ``CLIENT_KWARGS``, or the cluster
client's default retries) the call must also answer what the control answered.

* ``lost``: the connection is reset after Redis ran the call, no resend; the
  call raises :class:`ConnectionFailed` and its effect stands once;
* ``resend``: the same, with a client that sends the call again.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from django_redislock.exceptions import ConnectionFailed
from django_redislock.inventory import Stock
from django_redislock.queue import Queue
from django_redislock.queue.records import DEAD, DELAYED, IN_FLIGHT, READY

from . import inventory_tasks
from .faults import Args, command_name
from .proxied import ProxiedTarget, cuts_only, no_resend_options, resend_options

pytestmark = pytest.mark.timeout(60)

KINDS = ("single", "cluster")
FAULTS = ("lost", "resend")
SCRIPT_COMMANDS = (b"EVALSHA", b"EVAL", b"FCALL")
LEASE = 30.0


def script_on(name: str) -> Callable[[Args], bool]:
    needle = name.encode()

    def match(args: Args) -> bool:
        return command_name(args) in SCRIPT_COMMANDS and any(needle in arg for arg in args)

    return match


def queue_state(queue: Queue) -> dict[str, list[tuple[str, int, str]]]:
    """Every task of ``queue`` by state: (id, attempts, payload)."""
    return {
        state: sorted((t.id, t.attempts, repr(t.payload)) for t in queue.tasks(state, count=100))
        for state in (READY, DELAYED, IN_FLIGHT, DEAD)
    }


@dataclass
class Twin:
    """One side of a case: its name and the object the call runs on."""

    name: str
    subject: Any
    prepared: Any = None


class QueueOp:
    """An operation: ``prepare`` a twin, ``act`` (the call), ``state`` to compare."""

    def make(self, backend: Any, name: str) -> Twin:
        return Twin(name, backend.queue(name))

    def prepare(self, twin: Twin) -> None:
        raise NotImplementedError

    def act(self, twin: Twin) -> Any:
        raise NotImplementedError

    def answer(self, result: Any) -> Any:
        return result

    def state(self, twin: Twin) -> Any:
        return queue_state(twin.subject)


class Pop(QueueOp):
    def prepare(self, twin: Twin) -> None:
        twin.subject.enqueue("a", {"n": 1})
        twin.subject.enqueue("b", {"n": 2}, delay=0.001)  # due after "a": pop order is fixed

    def act(self, twin: Twin) -> Any:
        return twin.subject.pop(1, lease=LEASE)

    def answer(self, result: Any) -> Any:
        return [(t.id, t.attempts) for t in result]


class Ack(QueueOp):
    def prepare(self, twin: Twin) -> None:
        twin.subject.enqueue("a", {"n": 1})
        twin.subject.enqueue("b", {"n": 2}, delay=0.001)
        (twin.prepared,) = twin.subject.pop(1, lease=LEASE)

    def act(self, twin: Twin) -> Any:
        return twin.subject.ack(twin.prepared)


class EnqueueReplace(QueueOp):
    """Replace a task that a worker is running: the new copy is queued beside the old claim."""

    def prepare(self, twin: Twin) -> None:
        twin.subject.enqueue("a", {"v": 1})
        twin.subject.pop(1, lease=LEASE)

    def act(self, twin: Twin) -> Any:
        return twin.subject.enqueue("a", {"v": 2}, replace=True)


class EnqueuePriority(QueueOp):
    """A prioritized enqueue: a resend keeps one entry at its level (it answers False: the
    first copy was kept, as docs/queue.md says of any enqueue without replace)."""

    def prepare(self, twin: Twin) -> None:
        twin.subject.enqueue("a", {"v": 1})

    def act(self, twin: Twin) -> Any:
        return twin.subject.enqueue("b", {"v": 2}, priority=7)

    def answer(self, result: Any) -> Any:
        return None

    def state(self, twin: Twin) -> Any:
        return priority_state(twin.subject)


class EnqueueReplacePriority(EnqueueReplace):
    """Replace a running task with a prioritized copy: one new entry, at the new level."""

    def act(self, twin: Twin) -> Any:
        return twin.subject.enqueue("a", {"v": 2}, replace=True, priority=6)

    def state(self, twin: Twin) -> Any:
        return priority_state(twin.subject)


def priority_state(queue: Queue) -> Any:
    """The queue's tasks, their levels and the sizes of the two priority keys."""
    client = queue.backend.client
    index, levels = queue.priority_keys
    ready = sorted((t.id, t.priority) for t in queue.tasks(READY, count=100))
    return queue_state(queue), ready, client.zcard(index), client.hlen(levels)


class StockTake(QueueOp):
    def make(self, backend: Any, name: str) -> Twin:
        stock = Stock(name, order_task=inventory_tasks.record_order, queue=name, using=backend)
        return Twin(name, stock)

    def prepare(self, twin: Twin) -> None:
        twin.subject.set(5)

    def act(self, twin: Twin) -> Any:
        return twin.subject.take(buyer="buyer-1")

    def answer(self, result: Any) -> Any:
        return (result.result, result.remaining)

    def state(self, twin: Twin) -> Any:
        stats = twin.subject.stats()
        orders = queue_state(twin.subject.queue)
        counts = {state: len(tasks) for state, tasks in orders.items()}
        return (stats.remaining, stats.taken, stats.buyers, stats.reservations, counts)


OPS: dict[str, QueueOp] = {
    "pop": Pop(),
    "ack": Ack(),
    "enqueue_replace": EnqueueReplace(),
    "enqueue_priority": EnqueuePriority(),
    "enqueue_replace_priority": EnqueueReplacePriority(),
    "stock_take": StockTake(),
}

#: cases that are expected to fail, with what they need (none left)
KNOWN: dict[tuple[str, str], str] = {}


def params() -> list[Any]:
    out = []
    for op in OPS:
        for kind in KINDS:
            for fault in FAULTS:
                reason = KNOWN.get((op, fault))
                marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
                out.append(pytest.param(kind, op, fault, marks=marks, id=f"{kind}-{op}-{fault}"))
    return out


@pytest.mark.parametrize(("kind", "op_name", "fault"), params())
def test_queue_call_under_fault(
    kind: str, op_name: str, fault: str, request: pytest.FixtureRequest
) -> None:
    target: ProxiedTarget = request.getfixturevalue(f"proxied_{kind}")
    op = OPS[op_name]
    options = resend_options(kind) if fault == "resend" else no_resend_options(kind)
    backend = target.queue_backend(**options, **cuts_only(kind))  # the faults cut, see there
    suffix = uuid.uuid4().hex[:8]
    control = op.make(backend, f"ctl{suffix}")
    faulted = op.make(backend, f"flt{suffix}")
    op.prepare(control)
    op.prepare(faulted)
    expected = op.answer(op.act(control))

    faults = target.drop_reply(script_on(faulted.name), then="cut")
    error: BaseException | None = None
    try:
        answer = op.answer(op.act(faulted))
    except ConnectionFailed as exc:
        error = exc
    finally:
        target.clear()
    assert any(f.fired.is_set() for f in faults), "the fault never met the call"

    assert op.state(faulted) == op.state(control), "the call did not run exactly once"
    if fault == "resend":
        assert error is None, f"a resent call failed: {error!r}"
        assert answer == expected, "a resent call answered differently"
    else:
        assert error is not None, "a lost reply must fail the call (no resend here)"


def test_a_cluster_that_no_node_answers_mid_call_is_a_connection_failure(
    cluster_target: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What redis-py's cluster client raises when no node answers (seen when a script that
    Redis no longer had was loaded again during an outage) is ``ConnectionFailed``, which
    the worker rides out, not an error that ends it."""
    from redis.exceptions import RedisClusterException

    from .conftest import make_queue

    queue = make_queue(cluster_target)
    queue.enqueue("a")
    client = queue.backend.client

    def unreachable(*args: Any, **kwargs: Any) -> Any:
        raise RedisClusterException(
            "Redis Cluster cannot be connected. Please provide at least one reachable node"
        )

    monkeypatch.setattr(client, "execute_command", unreachable)
    with pytest.raises(ConnectionFailed, match="unreachable"):
        queue.claim(1)
    with pytest.raises(ConnectionFailed, match="unreachable"):
        queue.enqueue("b")
