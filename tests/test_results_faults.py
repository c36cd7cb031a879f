"""Results when a reply is lost and the client resends (the fault proxy, single and cluster).

The enqueue ``MULTI`` of a task that stores its result, and the worker's store,
each lose their reply after Redis ran them; a client that resends sends them
again. Either way the record holds one outcome of the current run, with one
wake-up token, and the waiter gets the value.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable, Iterator

import pytest
from django.test import override_settings

from django_redislock import queues, scripts
from django_redislock.queue.results import ResultStatus, record_keys
from django_redislock.queue.worker import Worker

from . import result_tasks as rt
from .faults import Args, command_name
from .proxied import ProxiedTarget, no_resend_options, resend_options

pytestmark = [pytest.mark.timeout(60), pytest.mark.django_db(transaction=True)]


@pytest.fixture(params=["single", "cluster"])
def resending(request: pytest.FixtureRequest) -> Iterator[ProxiedTarget]:
    target: ProxiedTarget = request.getfixturevalue(f"proxied_{request.param}")
    with override_settings(
        REDISLOCK_QUEUES={"default": target.params(**resend_options(target.kind))}
    ):
        yield target


def is_exec(args: Args) -> bool:
    return command_name(args) == b"EXEC"


def runs_script(name: str) -> Callable[[Args], bool]:
    sha = hashlib.sha1(scripts.source(name).encode()).hexdigest().encode()

    def match(args: Args) -> bool:
        return command_name(args) == b"EVALSHA" and len(args) > 1 and args[1] == sha

    return match


def drain() -> None:
    Worker([queues["default"].queue("results")], burst=True).run()


def warm_up() -> None:
    """Load every script on the servers first, so that a NOSCRIPT reload is not counted."""
    warm = rt.add.delay(0, 0)
    drain()
    assert warm.result(timeout=5) == 0


def test_a_resent_enqueue_multi_starts_the_record_once(resending: ProxiedTarget) -> None:
    warm_up()
    seen = resending.count(is_exec)
    faults = resending.drop_reply(is_exec, then="cut")
    handle = rt.add.delay(2, 5)
    resending.clear()
    assert sum(len(fault.hits) for fault in faults) == 1, "the fault never met the MULTI"
    assert resending.count(is_exec) - seen == 2, "the MULTI was not sent exactly twice"
    # as for a resent plain enqueue: the second send found the first copy
    assert handle.queued is False
    assert handle.status is ResultStatus.READY
    drain()
    assert handle.result(timeout=5) == 7
    done = record_keys(queues["default"].queue("results"), handle)[1]
    assert resending.raw().llen(done) == 1


def test_a_resent_store_stores_one_outcome(resending: ProxiedTarget) -> None:
    warm_up()
    handle = rt.add.delay(3, 4)
    store = runs_script("result_store")
    seen = resending.count(store)
    faults = resending.drop_reply(store, then="cut")
    drain()
    resending.clear()
    assert sum(len(fault.hits) for fault in faults) == 1, "the fault never met the store"
    assert resending.count(store) - seen == 2, "the store was not sent exactly twice"
    assert handle.result(timeout=5) == 7
    queue = queues["default"].queue("results")
    assert resending.raw().llen(record_keys(queue, handle)[1]) == 1
    assert queue.stats()["in_flight"] == 0  # stored, then acked


@pytest.fixture(params=["single", "cluster"])
def not_resending(request: pytest.FixtureRequest) -> Iterator[ProxiedTarget]:
    target: ProxiedTarget = request.getfixturevalue(f"proxied_{request.param}")
    params = target.params(**no_resend_options(target.kind))
    with override_settings(REDISLOCK_QUEUES={"default": params}):
        yield target


def test_a_store_that_never_reached_redis_leaves_the_task_to_run_again(
    not_resending: ProxiedTarget,
) -> None:
    """The store goes before the ack: a worker that cannot store does not ack."""
    warm_up()
    handle = rt.add.delay(4, 4)
    store = runs_script("result_store")
    faults = [proxy.drop_request(store) for proxy in not_resending.proxies]
    queue = queues["default"].queue("results")
    Worker([queue], burst=True, lease=1.0).run()  # rides out the lost store, then finds nothing
    not_resending.clear()
    assert sum(len(fault.hits) for fault in faults) == 1, "the fault never met the store"
    assert handle.status is ResultStatus.RUNNING  # not stored, not acked
    deadline = time.monotonic() + 20
    while queue.stats()["in_flight"] and time.monotonic() < deadline:
        Worker([queue], burst=True, lease=5.0).run()  # hands it out again after its lease
        time.sleep(0.2)
    assert handle.result(timeout=5) == 8
    assert queue.stats()["in_flight"] == 0


def test_a_waiter_whose_wait_is_cut_reads_again_and_gets_the_value(
    resending: ProxiedTarget,
) -> None:
    """A cut ``BLMOVE`` took nothing (it keeps the token): the waiter reads again, waits on."""
    warm_up()
    handle = rt.add.delay(2, 3)
    got: list[object] = []
    waiter = threading.Thread(target=lambda: got.append(handle.result(timeout=20)), daemon=True)
    waiter.start()
    assert resending.cut_once_sent("BLMOVE") >= 1
    time.sleep(0.2)
    assert waiter.is_alive()  # the cut did not end the wait with an error
    drain()
    waiter.join(10)
    assert got == [5]
    assert resending.count("BLMOVE") >= 2  # it blocked again after the cut
