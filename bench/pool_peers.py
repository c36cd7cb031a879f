"""The process-pool benchmark's peers: Huey, Dramatiq and arq, each with two processes.

Each peer has the three parts :class:`bench.pool.Library` asks for: queue ``n`` no-op tasks,
run its workers until they drained them (in the forked child the benchmark times), and a
check of its queue that the benchmark polls.
"""

from __future__ import annotations

import logging
import multiprocessing
import time
from collections.abc import Callable
from typing import Any

import redis

from bench import io_tasks
from bench.pool_runs import CONCURRENCY, POLL, Drain, arq_noop, noop
from bench.queue import fresh
from bench.workers import fill_arq

#: Dramatiq's queue and the hash of its unacknowledged messages (its Redis broker's layout).
DRAMATIQ_QUEUE = "bench"
DRAMATIQ_MESSAGES = f"dramatiq:{DRAMATIQ_QUEUE}.msgs"
#: arq's default queue (a sorted set of job ids).
ARQ_QUEUE = "arq:queue"


def huey_of(client: redis.Redis) -> Any:
    from huey import RedisHuey

    kwargs = client.connection_pool.connection_kwargs
    huey = RedisHuey("bench-pool", host=kwargs["host"], port=kwargs["port"])
    return huey, huey.task(name="noop")(noop)


def fill_huey(client: redis.Redis, n: int) -> None:
    _, huey_noop = huey_of(client)
    for i in range(n):
        huey_noop(i)


def drain_huey(client: redis.Redis) -> Drain:
    """Run Huey's two worker processes until its queue is empty, then stop them."""
    huey, _ = huey_of(fresh(client))
    logging.getLogger("huey").setLevel(logging.WARNING)
    consumer = huey.create_consumer(
        workers=CONCURRENCY, worker_type="process", periodic=False, check_worker_health=False
    )
    start = time.perf_counter()
    consumer.start()
    while huey.pending_count():
        time.sleep(POLL)
    consumer.stop(graceful=True)
    return Drain(start, 0, time.perf_counter() - start)


def huey_drained(client: redis.Redis) -> Callable[[], bool]:
    huey, _ = huey_of(client)
    return lambda: not huey.pending_count()


def url_of(client: redis.Redis) -> str:
    kwargs = client.connection_pool.connection_kwargs
    return f"redis://{kwargs['host']}:{kwargs['port']}/0"


def dramatiq_actor(client: redis.Redis) -> Any:
    return io_tasks.dramatiq_actor(
        url_of(client), noop, name="bench_pool_noop", queue=DRAMATIQ_QUEUE
    )


def fill_dramatiq(client: redis.Redis, n: int) -> None:
    actor = dramatiq_actor(client)
    for i in range(n):
        actor.send(i)


def drain_dramatiq(client: redis.Redis) -> Drain:
    """Run two Dramatiq worker processes of one thread until every message is acknowledged.

    Each process does what ``dramatiq -p 2 -t 1``'s ``worker_process`` does after the fork
    (the broker's ``process_boot``, then ``Worker(broker, worker_threads=1).start()``); this
    process polls the broker's messages as Huey's run polls its queue, then stops them.
    """
    from dramatiq import Worker as DramatiqWorker

    broker = dramatiq_actor(client).broker
    logging.getLogger("dramatiq").setLevel(logging.WARNING)
    ctx = multiprocessing.get_context("fork")  # what the CLI's multiprocessing uses on Linux
    stop = ctx.Event()

    def work() -> None:
        broker.emit_after("process_boot")
        worker = DramatiqWorker(broker, worker_threads=1)
        worker.start()
        stop.wait()
        worker.stop()

    start = time.perf_counter()
    processes = [ctx.Process(target=work) for _ in range(CONCURRENCY)]
    for process in processes:
        process.start()
    watch = fresh(client)
    while watch.hlen(DRAMATIQ_MESSAGES):
        time.sleep(POLL)
    stop.set()
    for process in processes:
        process.join(60)
    return Drain(start, 0, time.perf_counter() - start)


def dramatiq_drained(client: redis.Redis) -> Callable[[], bool]:
    return lambda: client.hlen(DRAMATIQ_MESSAGES) == 0


def fill_arq_noop(client: redis.Redis, n: int) -> None:
    fill_arq(url_of(client), n, "arq_noop")


def drain_arq(client: redis.Redis) -> Drain:
    """Run two arq burst workers, each in a forked process, until both exited."""
    from arq.connections import RedisSettings
    from arq.worker import Worker as ArqWorker

    settings = RedisSettings.from_dsn(url_of(client))
    ctx = multiprocessing.get_context("fork")

    def work() -> None:
        logging.getLogger("arq").setLevel(logging.WARNING)
        ArqWorker(
            functions=[arq_noop], redis_settings=settings, burst=True, handle_signals=False
        ).run()

    start = time.perf_counter()
    processes = [ctx.Process(target=work) for _ in range(CONCURRENCY)]
    for process in processes:
        process.start()
    for process in processes:
        process.join(3600)
    return Drain(start, 0, time.perf_counter() - start)


def arq_drained(client: redis.Redis) -> Callable[[], bool]:
    return lambda: client.zcard(ARQ_QUEUE) == 0
