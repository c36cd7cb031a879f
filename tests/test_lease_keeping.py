"""A live run keeps its lease: a task longer than its lease runs once, in every pool.

Real ``drain_queue`` processes on the single server and the cluster, with a 1.5 s lease
and tasks of 4.5 s without a time limit. Before the keeper renewed a run for as long as
it lived, each such task was handed out again every lease period (also to the worker
still running it), and the thread and async pools dead-lettered it ("lease expired
during attempt N") although every run succeeded.
"""

from __future__ import annotations

import itertools
import threading

import pytest

from django_redislock.queue.worker import Worker

from .conftest import RedisTarget
from .processes import finish, spawn, wait_for
from .test_pools_process import pool_queue, stamps
from .testapp import tasks

pytestmark = pytest.mark.slow

LEASE = 1.5
RUN = 4.5


@pytest.mark.parametrize("pool", ["solo", "thread", "async", "process"])
def test_a_run_longer_than_its_lease_starts_once_and_is_acked(real: RedisTarget, pool: str) -> None:
    # one more task than the worker(s) run at once: a free slot (or an idle second solo
    # worker) claims again while the long runs go on, and would take a lapsed one
    sync = [f"s{i}" for i in range(3)]
    for tag in sync:
        tasks.wait_io.enqueue(args=[tag, RUN], id=tag)
    extra = ["--concurrency", "2"]
    if pool == "async":
        for i in range(2):
            tasks.wait_io_async.enqueue(args=[f"a{i}", RUN], id=f"a{i}")
        sync += ["a0", "a1"]
        extra = ["--concurrency", "4"]
    elif pool == "solo":
        extra = []
    args = ["pool", "--pool", pool, *extra, "--lease", str(LEASE), "--burst", "--timeout", "40"]
    if pool in ("solo", "process"):
        args += ["--batch", "1"]
    workers = [spawn(real, *args) for _ in range(2 if pool == "solo" else 1)]
    for worker in workers:
        code, out, err = finish(worker, timeout=60)
        assert code == 0, out + err
    starts = sorted(tag for tag, _, _ in stamps("start"))
    ends = sorted(tag for tag, _, _ in stamps("end"))
    assert starts == sorted(sync), starts  # one start per task
    assert ends == sorted(sync), ends
    q = pool_queue()
    assert q.tasks("dead") == []
    stats = q.stats()
    assert (stats["ready"], stats["delayed"], stats["in_flight"]) == (0, 0, 0), stats


def test_process_pool_children_are_solo_whatever_the_alias_pool(real: RedisTarget) -> None:
    """One child with the alias set to 3 threads still runs one task at a time."""
    tags = [f"p{i}" for i in range(3)]
    for tag in tags:
        tasks.wait_io.enqueue(args=[tag, 0.5], id=tag)
    options = {"WORKER_POOL": "thread", "WORKER_CONCURRENCY": 3}
    args = ["pool", "--pool", "process", "--concurrency", "1", "--burst", "--timeout", "30"]
    code, out, err = finish(spawn(real, *args, options=options), timeout=60)
    assert code == 0, out + err
    spans = {tag: [when] for tag, _, when in stamps("start")}
    for tag, _, when in stamps("end"):
        spans[tag].append(when)
    assert sorted(spans) == tags
    ordered = sorted(spans.values())
    for (_, end), (start, _) in itertools.pairwise(ordered):
        assert start >= end, ordered  # never two runs at once in the one child


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("pool", ["thread", "async"])
def test_a_worker_never_starts_a_second_copy_of_a_run_it_has(real: RedisTarget, pool: str) -> None:
    """A lease that lapsed under a live run (as through an outage) is adopted, not re-run.

    The run's lease deadline is moved into the past by hand, as a renewal lost for longer
    than the lease would leave it; the worker's next claim hands the task back to it.
    """
    fn = tasks.wait_io_async if pool == "async" else tasks.wait_io
    fn.enqueue(args=["x", 3.0], id="x")
    q = pool_queue()
    worker = Worker([q], pool=pool, concurrency=2, lease=60, burst=True, timeout=30)
    done = threading.Thread(target=worker.run, daemon=True)
    done.start()
    wait_for(lambda: [tag for tag, _, _ in stamps("start")] == ["x"], 20, "x to start")
    real.raw.zadd(q.keys[1], {"x": 1})  # its lease "lapsed": the next claim takes it back
    done.join(40)
    assert not done.is_alive()
    assert [tag for tag, _, _ in stamps("start")] == ["x"]  # one run, in one worker
    assert [tag for tag, _, _ in stamps("end")] == ["x"]
    assert worker.summary.succeeded == 1, worker.summary
    stats = q.stats()
    assert (stats["ready"], stats["in_flight"]) == (0, 0), stats
    assert q.tasks("dead") == []
