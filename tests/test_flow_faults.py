"""A rate-limited claim and a task's rate-limit check whose reply is lost (and resent).

Same method as tests/test_queue_faults.py: twin queues prepared alike, the call
run on both, the faulted twin's reply dropped after Redis ran it; afterwards
the twins hold the same tasks and their limits have counted the same runs.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from django_redislock.exceptions import ConnectionFailed
from django_redislock.validation import Rate

from .proxied import ProxiedTarget, no_resend_options, resend_options
from .test_queue_faults import LEASE, QueueOp, Twin, queue_state, script_on

pytestmark = pytest.mark.timeout(60)

#: one run an hour, three at once: a probe after the call shows how many it counted
HOURLY = Rate("3/h-burst", 3600 * 1_000_000, 3)


class LimitedPop(QueueOp):
    """A claim under the queue's rate limit: counted once, resent or not."""

    def prepare(self, twin: Twin) -> None:
        queue = twin.subject
        queue.enqueue_many([(f"t{i}", i) for i in range(5)])
        queue._run(queue._flow_call("limit", HOURLY.interval, HOURLY.burst, HOURLY.text))

    def act(self, twin: Twin) -> Any:
        return [t.id for t in twin.subject.pop(1, lease=LEASE)]

    def state(self, twin: Twin) -> Any:
        before = queue_state(twin.subject)
        probe = len(twin.subject.pop(5, lease=LEASE))  # 2 left if the call counted one
        return before, probe


class Throttle(QueueOp):
    """A task's own limit, checked before its run: counted once, resent or not."""

    def prepare(self, twin: Twin) -> None:
        queue = twin.subject
        queue.enqueue_many([(f"t{i}", i) for i in range(4)])
        twin.prepared = queue.claim(4, lease=LEASE, start=False).tasks

    def act(self, twin: Twin) -> Any:
        return twin.subject.throttle(twin.prepared[0], "job", HOURLY)

    def state(self, twin: Twin) -> Any:
        queue, tasks = twin.subject, twin.prepared
        # the in-flight tasks (the due times of given-back ones differ between twins), then
        # probes: run, run, deferred when the call counted one run
        probes = [queue.throttle(task, "job", HOURLY) for task in tasks[1:]]
        return queue_state(queue)["in_flight"], probes


OPS = {"limited_pop": LimitedPop(), "throttle": Throttle()}


@pytest.mark.parametrize("fault", ["lost", "resend"])
@pytest.mark.parametrize("op_name", sorted(OPS))
@pytest.mark.parametrize("kind", ["single", "cluster"])
def test_flow_call_under_fault(
    kind: str, op_name: str, fault: str, request: pytest.FixtureRequest
) -> None:
    target: ProxiedTarget = request.getfixturevalue(f"proxied_{kind}")
    op = OPS[op_name]
    options = resend_options(kind) if fault == "resend" else no_resend_options(kind)
    backend = target.queue_backend(**options)
    suffix = uuid.uuid4().hex[:8]
    control, faulted = op.make(backend, f"ctl{suffix}"), op.make(backend, f"flt{suffix}")
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
    assert op.state(faulted) == op.state(control), "the call did not count exactly once"
    if fault == "resend":
        assert error is None and answer == expected
    else:
        assert error is not None
