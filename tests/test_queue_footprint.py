"""What one queued task costs the server: the structures it occupies and the commands it runs.

docs/queue.md ("Memory per queued task") accounts for the bytes of a waiting task by
structure, and bench/memory.py measures them; these tests pin the layout that account
rests on (a change to it must update both) and the command count of a one-call enqueue
(bench/queue.py's hot path), so a script that grows is seen here before it is in a benchmark.
"""

from __future__ import annotations

from typing import Any

from django_redislock.queue import Queue

from .conftest import RedisTarget, make_queue


def sizes(q: Queue) -> dict[str, int]:
    """Elements per key of the queue (keys that hold one entry per task, and the others)."""
    raw: Any = q.backend.client
    found = {}
    for key in raw.scan_iter(match=q.keys[0].rsplit(":", 1)[0] + ":*", count=1000):
        name = key.decode().rsplit(":", 1)[-1]
        kind = raw.type(key).decode()
        found[name] = {"zset": raw.zcard, "hash": raw.hlen, "list": raw.llen}[kind](key)
    return found


#: the server commands of one enqueue of a fresh task: the script, TIME, HSETNX (store +
#: dedup), ZADD (order), HSET (enqueue time), LLEN (wake-up), HMGET + 2 HINCRBY (rate buckets)
ONE_ENQUEUE = {
    "evalsha": 1,
    "time": 1,
    "hsetnx": 1,
    "zadd": 1,
    "hset": 1,
    "llen": 1,
    "hmget": 1,
    "hincrby": 2,
}


def commands_since_reset(raw: Any) -> dict[str, int]:
    """Calls per command since ``CONFIG RESETSTAT`` (those two reads left out)."""
    stats = raw.info("commandstats")
    return {
        name[len("cmdstat_") :]: int(v["calls"])
        for name, v in stats.items()
        if not name.startswith(("cmdstat_config", "cmdstat_info"))
    }


def test_a_waiting_task_is_one_entry_in_pending_payload_and_enqueue_times(
    single_target: RedisTarget,
) -> None:
    q = make_queue(single_target)
    q.enqueue_many([(f"a{i}", "x" * 100) for i in range(150)])
    first = sizes(q)
    q.enqueue_many([(f"b{i}", "x" * 100) for i in range(150)])
    second = sizes(q)
    grew = {
        name: second[name] - first.get(name, 0)
        for name in second
        if second[name] != first.get(name)
    }
    # three entries per task; the signal list and the rate buckets stay as they were, and
    # a task of the default priority has no entry in the priority index or the levels hash
    assert grew == {"pending": 150, "payload": 150, "enqueued": 150}
    assert not {"prio", "levels"} & set(second), second


def test_a_one_call_enqueue_is_one_script_of_eight_server_commands(
    single_target: RedisTarget,
) -> None:
    q = make_queue(single_target)
    raw: Any = single_target.raw
    assert q.enqueue("warm", 1)  # the signal list and the rate buckets exist from here on
    raw.config_resetstat()
    assert q.enqueue("one", 2)
    calls = commands_since_reset(raw)
    assert calls == ONE_ENQUEUE, calls
