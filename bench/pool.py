"""Process-pool benchmark: ``drain_queue --pool process --concurrency 2`` beside its peers.

N no-op tasks are queued, then drained by two worker processes of each library, on
one private server in one run:

* django-redislock: the pool's own supervisor and children
  (:class:`~django_redislock.queue.supervisor.Supervisor`, ``run_child``), each child
  a burst ``Worker`` claiming what ``drain_queue`` gives it without ``--batch``: its
  share of the default batch, ceil(100 / concurrency) tasks per round trip;
* Huey: its consumer with ``workers=2, worker_type="process"``;
* Dramatiq: what ``dramatiq -p 2 -t 1`` runs with the Redis broker: two forked processes,
  each its ``Worker`` with one thread (the CLI's ``worker_process``, without its logging
  pipe);
* arq: two forked processes, each its burst ``Worker`` with its defaults (``max_jobs=10``,
  polling every 0.5 s): arq has no process pool, so two workers are what a user runs.

Every library is timed twice by the benchmark process, until it sees the queue drained
(polling the server every :data:`POLL` s):

* from the run's start: the moment the library's run begins, its forks, its workers'
  start and their first connections included (the interpreter's start and the imports
  are not: every run is forked from the benchmark process, which imported them);
* from the first task: the ``perf_counter()`` of the first run that started in any of
  the run's processes (each process notes its first run on the server, one ``RPUSH``
  per process: :func:`first_run`), the steady drain.

"Drained" is, for django-redislock, nothing ready, delayed or in flight (every run
acknowledged); for Huey nothing pending (its workers take one task at a time, so at most
its last two no-op runs are still finishing); for Dramatiq no message left unacknowledged
(its ``.msgs`` hash empty); for arq an empty queue (a job leaves it when it finished).
No library's shutdown is timed (Huey and Dramatiq are stopped after it, our children and
arq's burst workers exit after their last task); how long our pool took until its last
child exited is reported beside it.

Each library runs in a forked child of the benchmark process, so none shares a
connection or a warm cache with another. The libraries take turns in each of
:data:`ROUNDS` rounds (the order rotates); every figure is the median of the rounds with
their range, each ratio is the median of the per-round ratios, and the load average is
sampled after every pass (the best pass from the start is kept beside the median, for the
older tables).
"""

from __future__ import annotations

import math
import multiprocessing
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NoReturn

import redis
from django.test import override_settings

from bench.common import LoadAverage, between, reply_parser, rotated
from bench.pool_peers import (
    arq_drained,
    drain_arq,
    drain_dramatiq,
    drain_huey,
    dramatiq_drained,
    fill_arq_noop,
    fill_dramatiq,
    fill_huey,
    huey_drained,
)
from bench.pool_runs import CONCURRENCY, FIRST_KEY, POLL, SERVER, Drain, noop
from django_redislock import queues, task
from django_redislock.management.commands._pool import child_batch
from django_redislock.queue.pool_child import run_child
from django_redislock.queue.supervisor import Supervisor
from django_redislock.queue.worker import Worker

ROUNDS = 5
#: Tasks per pass. At 20,000 a pass of the pool lasted about a quarter of a second, so its
#: fixed costs (two forks, the children's first connections and claims, about 25 ms) were a
#: tenth of it and most of the spread between passes; 60,000 measure the drain itself.
TASKS = 60_000
#: Tasks per pass of Dramatiq and arq. Both wait between fetches by design (arq polls every
#: 0.5 s; Dramatiq's consumer with one thread prefetches 2 messages and sleeps a back-off of
#: 5 ms or more until they are acknowledged), so they drain a few hundred tasks a second and a
#: pass of 60,000 would last minutes; at this size a pass lasts tens of seconds, and their
#: start (under 0.1 s to the first task in smoke runs) is a small part of it. The same no-op
#: task, the same rounds.
POLLING_TASKS = 10_000

redislock_noop = task(queue="bench", using="bench", name="bench.pool.noop")(noop)


@dataclass
class Pass:
    """What the benchmark saw of one drain of ``n`` tasks."""

    from_start: float  # tasks/s from the run's start until drained
    from_first: float  # tasks/s from the first task's start until drained
    startup: float  # seconds from the run's start to its first task
    returned: float  # tasks/s until the run returned


def watched(
    client: redis.Redis, n: int, run: Callable[[], Drain], drained: Callable[[], bool]
) -> tuple[Pass, Drain]:
    """Run ``run`` in a forked child and time it until ``drained()`` is true.

    ``drained`` is polled here, in the benchmark process, every :data:`POLL` s: the
    same clock and the same polling for every library, and no thread in the process
    that forks the pool. The first task's start is the earliest of the processes' notes.
    """
    ctx = multiprocessing.get_context("fork")
    parent, child = ctx.Pipe()
    process = ctx.Process(target=lambda: child.send(run()))
    process.start()
    while not drained():
        time.sleep(POLL)
    seen = time.perf_counter()
    notes = [float(t) for t in client.lrange(FIRST_KEY, 0, -1)]
    first = min(notes) if notes else math.nan
    drain: Drain = parent.recv()
    process.join(60)
    return (
        Pass(
            from_start=n / (seen - drain.started),
            from_first=n / (seen - first),
            startup=first - drain.started,
            returned=n / drain.returned,
        ),
        drain,
    )


def fill_redislock(client: redis.Redis, n: int) -> None:
    redislock_noop.enqueue_many((((i,), {}) for i in range(n)), batch_size=1000)


def drain_redislock() -> Drain:
    """Run the pool until its last child exited."""

    def make_worker(progress: Any) -> Worker:
        return Worker(
            [queues["bench"].queue("bench")],
            batch=child_batch(None, CONCURRENCY),  # drain_queue's own, without --batch
            burst=True,
            progress=progress,
        )

    def child_main(slot: int, pipes: tuple[int, int], close: list[int]) -> NoReturn:
        run_child(make_worker, pipes, close)

    start = time.perf_counter()
    outcome = Supervisor(child_main, {}, CONCURRENCY, burst=True).run()
    return Drain(start, outcome.summary.processed, time.perf_counter() - start)


def redislock_drained(client: redis.Redis) -> Callable[[], bool]:
    queue = queues["bench"].queue("bench")

    def drained() -> bool:
        stats = queue.stats()
        return stats["ready"] + stats["delayed"] + stats["in_flight"] == 0

    return drained


@dataclass
class Library:
    """How the benchmark queues the N tasks of a library, runs its pool, and sees it drained.

    ``drained(client)`` makes the check the benchmark polls (built once a pass, so a poll is
    one command and nothing else).
    """

    label: str  # what it runs, for the table
    tasks: int  # tasks per pass (not --quick)
    fill: Callable[[redis.Redis, int], None]
    drain: Callable[[redis.Redis], Drain]
    drained: Callable[[redis.Redis], Callable[[], bool]]


LIBRARIES: dict[str, Library] = {
    "django-redislock": Library(
        f"drain_queue --pool process --concurrency {CONCURRENCY} --burst",
        TASKS,
        fill_redislock,
        lambda client: drain_redislock(),
        redislock_drained,
    ),
    "Huey": Library(
        f"consumer workers={CONCURRENCY}, worker_type='process'",
        TASKS,
        fill_huey,
        drain_huey,
        huey_drained,
    ),
    "Dramatiq": Library(
        f"dramatiq -p {CONCURRENCY} -t 1 (Redis broker)",
        POLLING_TASKS,
        fill_dramatiq,
        drain_dramatiq,
        dramatiq_drained,
    ),
    "arq": Library(
        f"{CONCURRENCY} burst Worker processes (max_jobs=10)",
        POLLING_TASKS,
        fill_arq_noop,
        drain_arq,
        arq_drained,
    ),
}
OURS = "django-redislock"
COLUMNS = [
    "library",
    "what it runs",
    "tasks a pass",
    "tasks/s from start",
    "range (start)",
    "tasks/s from first task",
    "range (first task)",
    "to first task ms",
    "best pass (start)",
]


def one_pass(name: str, client: redis.Redis, n: int) -> Pass:
    """One drain of ``n`` no-op tasks by ``name``, timed from its start and its first task."""
    library = LIBRARIES[name]
    client.flushall()
    library.fill(client, n)
    drained = library.drained(client)
    assert not drained(), f"{name}: the queued tasks are not where the benchmark looks"
    found, drain = watched(client, n, lambda: library.drain(client), drained)
    if name == OURS:
        assert drain.processed == n, f"the pool reported {drain.processed} tasks of {n}"
    return found


def ratio(ours: list[float], theirs: list[float]) -> str:
    """``median (min-max)`` of the per-round ratios ``ours / theirs``."""
    found = [a / b for a, b in zip(ours, theirs, strict=True)]
    return f"{statistics.median(found):.2f}x ({min(found):.2f}-{max(found):.2f})"


def run(server: Any, quick: bool) -> dict[str, Any]:
    sizes = {name: 2000 if quick else library.tasks for name, library in LIBRARIES.items()}
    rounds = 1 if quick else ROUNDS
    client = server.client()
    kwargs = client.connection_pool.connection_kwargs
    SERVER.update(host=kwargs["host"], port=kwargs["port"])
    alias = {"bench": {"LOCATION": server.url, "KEY_PREFIX": "bench"}}
    passes: dict[str, list[Pass]] = {name: [] for name in LIBRARIES}
    load = LoadAverage()
    with override_settings(REDISLOCK_QUEUES=alias):
        for turn in range(rounds):
            for name in rotated(list(LIBRARIES), turn):
                passes[name].append(one_pass(name, client, sizes[name]))
                load.sample()
    start = {name: [p.from_start for p in found] for name, found in passes.items()}
    first = {name: [p.from_first for p in found] for name, found in passes.items()}
    rows = [
        {
            "library": name,
            "what it runs": library.label,
            "tasks a pass": sizes[name],
            "tasks/s from start": statistics.median(start[name]),
            "range (start)": between(start[name]),
            "tasks/s from first task": statistics.median(first[name]),
            "range (first task)": between(first[name]),
            "to first task ms": statistics.median(p.startup * 1000 for p in passes[name]),
            "best pass (start)": max(start[name]),
        }
        for name, library in LIBRARIES.items()
    ]
    peers = [name for name in LIBRARIES if name != OURS]
    return {
        "name": "pool",
        "columns": COLUMNS,
        "rows": rows,
        "notes": [
            f"No-op tasks ('tasks a pass') drained by {CONCURRENCY} worker processes of each "
            "library (Dramatiq and arq wait between fetches by design and drain fewer a pass, "
            "so that a pass lasts tens of seconds, not minutes). Median of "
            f"{rounds} interleaved rounds (the order rotates each round), range beside it; "
            f"{load.note()}, median {statistics.median(load.samples):.1f} (a shared machine: "
            "the server shares the same CPUs).",
            "Reproduce: python3 dev.py bench pool. django-redislock: drain_queue --pool process "
            f"--concurrency {CONCURRENCY} --burst (its supervisor and children, each claiming "
            f"{child_batch(None, CONCURRENCY)} tasks per round trip); Huey: its consumer with "
            f"workers={CONCURRENCY}, worker_type='process'; Dramatiq: dramatiq -p {CONCURRENCY} "
            "-t 1 on its Redis broker (two forked processes, each its Worker with one thread); "
            f"arq: it has no process pool, so {CONCURRENCY} forked processes each run its burst "
            "Worker with its defaults (max_jobs=10, a poll every 0.5 s, results kept an hour).",
            "'from start': from the run's start (forked from the benchmark process: the forks, "
            "the workers' start and first connections included, the interpreter and imports "
            "not) until the benchmark, polling every "
            f"{POLL * 1000:g} ms, saw the queue drained; 'from first task': from the start of "
            "the run's first task (each process notes its first on the server) until then; "
            "'to first task ms' is the time between the two starts. No library's shutdown is "
            "timed.",
            "every pass from start / from first task (tasks/s): "
            + "; ".join(
                f"{name}: " + ", ".join(f"{p.from_start:,.0f} / {p.from_first:,.0f}" for p in found)
                for name, found in passes.items()
            ),
            "django-redislock until its last child exited (tasks/s): "
            + ", ".join(f"{p.returned:,.0f}" for p in passes[OURS]),
            f"reply parser (every library uses redis-py {redis.__version__}): {reply_parser()}",
            "django-redislock vs each peer (median of per-round ratios), from start; from "
            "first task: "
            + "; ".join(
                f"{peer} {ratio(start[OURS], start[peer])}; {ratio(first[OURS], first[peer])}"
                for peer in peers
            ),
            "process-pool drain vs Huey from start (median of per-round ratios): "
            f"{ratio(start[OURS], start['Huey'])}; best pass vs best pass "
            f"{max(start[OURS]) / max(start['Huey']):.2f}x (target >= 8x)",
        ],
    }
