"""The connection a thread keeps for hot calls: kept, checked, given back, bypassed."""

from __future__ import annotations

import gc
import os
import threading
import weakref
from typing import Any

import redis

from django_redislock.calls import direct

from .conftest import RedisTarget


def in_use(pool: Any) -> int:
    return len(pool._in_use_connections)


def warm_lock(target: RedisTarget, **options: Any) -> Any:
    backend = target.lock_backend(**options)
    lock = backend.lock("kept", ttl=5)
    with lock:
        pass
    return backend, lock


def test_a_thread_keeps_one_connection_and_gives_it_back_when_it_ends(
    single_target: RedisTarget,
) -> None:
    backend, _ = warm_lock(single_target)
    pool = backend.client.connection_pool
    kept_here = in_use(pool)
    assert kept_here == 1  # this thread's, kept between calls

    def cycles() -> None:
        lock = backend.lock("kept-in-thread", ttl=5)
        for _ in range(20):
            with lock:
                assert in_use(pool) == kept_here + 1  # one more, whatever the number of calls

    thread = threading.Thread(target=cycles)
    thread.start()
    thread.join(30)
    assert in_use(pool) == kept_here  # back in the pool once the thread ended
    assert len(pool._available_connections) >= 1


def test_a_connection_the_server_closed_is_reopened_before_the_send(
    single_target: RedisTarget,
) -> None:
    _, lock = warm_lock(single_target)
    single_target.raw.client_kill_filter(_type="normal", skipme=True)  # as a restart would
    with lock:
        assert lock.fence > 0
    calls = single_target.raw.info("commandstats")["cmdstat_evalsha"]["calls"]
    assert calls >= 4  # the two cycles ran; none of their calls failed


def test_a_blocking_pool_and_a_busy_connection_use_the_pool(single_target: RedisTarget) -> None:
    blocking = redis.BlockingConnectionPool.from_url(single_target.location, max_connections=4)
    assert direct._kept_connection(blocking) is None  # a deliberate limit: never held back
    backend, lock = warm_lock(single_target)
    pool = backend.client.connection_pool
    kept = direct._kept_connection(pool)
    assert kept is not None
    kept.busy = True  # as if a signal handler interrupted a call on it
    try:
        assert direct._kept_connection(pool) is None
        with lock:  # served by a connection of the pool, handed back after each call
            pass
        assert in_use(pool) == 1
    finally:
        kept.busy = False


def test_a_crowded_pool_is_not_held_back(single_target: RedisTarget) -> None:
    pool = redis.ConnectionPool.from_url(single_target.location, max_connections=2)
    taken = pool.get_connection()
    try:
        assert direct._kept_connection(pool) is None  # half of max_connections are in use
    finally:
        pool.release(taken)
    assert direct._kept_connection(pool) is not None


def test_a_forked_child_does_not_use_the_parents_connection(single_target: RedisTarget) -> None:
    backend, lock = warm_lock(single_target)
    parent_kept = direct._kept_connection(backend.client.connection_pool)
    assert parent_kept is not None
    pid = os.fork()
    if pid == 0:  # the child: its own connection, or nothing at all
        code = 1
        try:
            child = backend.lock("kept-child", ttl=5)
            with child:
                kept = direct._kept_connection(backend.client.connection_pool)
                code = 0 if kept is None or kept is not parent_kept else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    with lock:  # the parent's connection still works: the child never wrote on it
        assert lock.fence > 0


def test_a_thread_keeps_connections_of_a_bounded_number_of_pools(
    single_target: RedisTarget,
) -> None:
    clients = [redis.Redis.from_url(single_target.location) for _ in range(direct.MAX_KEPT + 1)]
    for client in clients:
        sender = direct.direct_sender(client, ("PING",))
        assert sender is not None and sender.call([]) == b"PONG"
    pools = [client.connection_pool for client in clients]
    # the oldest pool got its connection back when the thread used one pool too many
    assert [in_use(pool) for pool in pools] == [0] + [1] * direct.MAX_KEPT
    oldest = weakref.ref(pools[0])
    del clients, pools, sender
    gc.collect()
    assert oldest() is None  # so a dropped client's pool is free to go
