"""A Cluster client's slot-map reload raced by another thread: a dropped connection, not a bug.

After a connection error a ``RedisCluster`` reloads its slot map inside the call. Two
threads of one process that reload at once can break each other's reload (redis-py's node
manager is shared): a ``RuntimeError`` ("dictionary changed size during iteration") or an
``IndexError`` comes out of the call. A seckill run with 8 buyer threads met it while a
master restarted. The call layer turns it into ``ConnectionFailed`` (what the connection
error that started the reload would have been), so a lock's lost-reply handling and a
worker's outage handling apply.

The race itself cannot be timed from a test; its outcome can: the call's reply is really
lost and its connection cut at the proxy, and the reload that brings about raises what the
racing thread's reload made it raise (once).
"""

from __future__ import annotations

from typing import Any

import pytest

from django_redislock.exceptions import ConnectionFailed

from .proxied import ProxiedTarget

RACES = {
    "changed size": RuntimeError("dictionary changed size during iteration"),
    "no primary": IndexError("list index out of range"),
}


def race_the_next_reload(client: Any, error: Exception) -> list[int]:
    """The client's next slot-map reload raises ``error``; the count of reloads raced."""
    manager = client.nodes_manager
    reload = manager.initialize
    raced: list[int] = []

    def initialize(*args: Any, **kwargs: Any) -> Any:
        if not raced:
            raced.append(1)
            raise error
        return reload(*args, **kwargs)

    manager.initialize = initialize
    return raced


@pytest.mark.parametrize("race", sorted(RACES))
def test_a_raced_reload_is_a_dropped_connection_to_a_lock(
    proxied_cluster: ProxiedTarget, race: str
) -> None:
    locks = proxied_cluster.lock_backend("race")
    lock = locks.lock("raced", ttl=5.0)
    assert lock.acquire(blocking=False)  # connections made, scripts loaded
    lock.release()
    raced = race_the_next_reload(locks.client, RACES[race])
    proxied_cluster.drop_reply("EVALSHA", then="cut")
    # the reload's error is a lost reply: the acquire is resent and returns its grant
    assert lock.acquire(blocking=False)
    assert raced == [1]
    assert lock.held_by_me()
    lock.release()
    assert not locks.lock("raced", ttl=5.0).locked()


@pytest.mark.parametrize("race", sorted(RACES))
def test_a_raced_reload_is_connection_failed_to_a_queue_call(
    proxied_cluster: ProxiedTarget, race: str
) -> None:
    queue = proxied_cluster.queue_backend("race").queue("raced")
    assert queue.enqueue("first", {"n": 1})
    raced = race_the_next_reload(queue.backend.client, RACES[race])
    proxied_cluster.drop_reply("EVALSHA", then="cut")
    with pytest.raises(ConnectionFailed):
        queue.stats()
    assert raced == [1]
    assert queue.stats()["ready"] == 1  # and the next call reaches the cluster again


def test_an_error_of_the_same_type_from_elsewhere_is_raised_as_it_is(
    proxied_cluster: ProxiedTarget,
) -> None:
    locks = proxied_cluster.lock_backend("race")
    with pytest.raises(RuntimeError, match="not redis-py"), locks.errors():
        raise RuntimeError("not redis-py")
