"""The call layer: a server that forgot the scripts (SCRIPT FLUSH) in every form of call."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from django_redislock.calls.batch import Batch
from django_redislock.calls.script import Script, script
from django_redislock.exceptions import InvalidArgument
from django_redislock.locking.index import force_release_call
from django_redislock.locking.pipeline import run_scripts
from django_redislock.queue.arguments import enqueue_args

from .conftest import RedisTarget, make_queue

pytestmark = pytest.mark.parametrize("kind", ["single", "cluster"])


@pytest.fixture
def target(kind: str, request: pytest.FixtureRequest) -> RedisTarget:
    found: RedisTarget = request.getfixturevalue(f"{kind}_target")
    return found


def primaries(target: RedisTarget) -> list[Any]:
    raw: Any = target.raw
    if target.kind == "cluster":
        return [raw.get_redis_connection(node) for node in raw.get_primaries()]
    return [raw]


def flush(target: RedisTarget) -> None:
    for server in primaries(target):
        server.script_flush()


def evalsha_count(target: RedisTarget) -> int:
    return sum(
        int(server.info("commandstats").get("cmdstat_evalsha", {"calls": 0})["calls"])
        for server in primaries(target)
    )


def known(target: RedisTarget, name: str) -> bool:
    return all(server.script_exists(script(name).sha)[0] for server in primaries(target))


def test_a_blocking_call_loads_the_script_and_runs_once(target: RedisTarget) -> None:
    backend = target.lock_backend()
    lock = backend.lock("flushed", ttl=30)
    assert lock.acquire(blocking=False)  # the prepared call (direct sender where allowed)
    lock.release()
    flush(target)
    assert lock.acquire(blocking=False)
    assert known(target, "lock_acquire")
    lock.release()
    flush(target)
    q = make_queue(target)
    assert q.enqueue("a") is True  # the queue's prepared enqueue
    flush(target)
    assert q.enqueue("b") is True and len(q.claim(5).tasks) == 2  # prepared, with a request key
    flush(target)
    assert isinstance(Script("queue_get").run(target.raw, q.script_keys, ["a"]), list)


def test_an_asyncio_call_loads_the_script_and_runs_once(target: RedisTarget) -> None:
    backend = target.lock_backend()
    q = make_queue(target)

    async def scenario() -> None:
        lock = backend.lock("flushed-async", ttl=30)
        flush(target)
        assert await lock.acquire_async(blocking=False)  # the node's bound script
        assert known(target, "lock_acquire")
        await lock.release_async()
        flush(target)
        assert await q.enqueue_async("a") is True  # Script.run_async
        assert known(target, "queue_enqueue")

    asyncio.run(scenario())
    assert [task.id for task in q.claim(5).tasks] == ["a"]


def test_a_pipeline_resends_only_the_calls_that_did_not_run(target: RedisTarget) -> None:
    """A call that ran is never sent twice: a second force-release would report no hold."""
    backend = target.lock_backend()
    held = backend.lock("held", ttl=30)
    assert held.acquire(blocking=False)
    other = backend.lock("other", ttl=30)
    flush(target)
    force = force_release_call(backend, "held")
    script(force[0]).load(target.raw)  # the force-release is known, the grant is not
    attempt = other._attempt("someone", other.meta("t", None), False, 0.0)
    before = evalsha_count(target)
    released, granted = run_scripts(backend, [force, attempt])
    assert int(released) > 0 and int(granted[0]) == 1
    assert evalsha_count(target) - before == 3  # two sent, then the grant alone


def test_a_batch_can_resend_the_rest_from_the_first_call_that_did_not_run(
    target: RedisTarget,
) -> None:
    q = make_queue(target)
    q.enqueue("a")
    flush(target)
    script("queue_get").load(target.raw)
    keys = [*q.script_keys, q.rates_key]
    batch = Batch(target.raw if target.kind == "single" else primary_for(target, keys[0]))
    batch.add("queue_enqueue", keys, enqueue_args([q.prepare("b", "x")], replace=False))
    batch.add("queue_get", q.script_keys, ["b"])
    before = evalsha_count(target)
    flags, got = batch.execute(resend="rest")
    assert flags == [1] and got  # the lookup ran again after the enqueue it depends on
    assert evalsha_count(target) - before == 4


def primary_for(target: RedisTarget, key: str) -> Any:
    raw: Any = target.raw
    return raw.get_redis_connection(raw.nodes_manager.get_node_from_slot(raw.keyslot(key)))


def test_the_direct_sender_can_be_switched_off(target: RedisTarget) -> None:
    """``OPTIONS['DIRECT_SENDER']``: only a plain client on a standard pool gets one, if on."""
    for direct in (True, False):
        backend = target.lock_backend(DIRECT_SENDER=direct)
        lock = backend.lock(f"switch-{direct}", ttl=30)
        assert lock.acquire(blocking=False)
        lock.release()
        sender = lock._scripts._entries["lock_acquire"].sender
        assert (sender is not None) == (direct and target.kind == "single")
        q = make_queue(target, f"switch-{direct}", DIRECT_SENDER=direct)
        assert q.enqueue("a") is True
        assert q._enqueue_head is not None
        assert (q._enqueue_head[2] is not None) == (direct and target.kind == "single")


def test_queue_calls_are_prepared_once_per_script_and_client(target: RedisTarget) -> None:
    """A claim's flow, request, unique and four group keys lead its arguments; the head is the
    prepared one, even after ``NOSCRIPT`` (the reload sends the whole call with its real key
    count)."""
    for direct in (True, False):
        q = make_queue(target, f"prepared-{direct}", DIRECT_SENDER=direct)
        q.enqueue_many([("a", 1), ("b", 2)])
        first = q.claim(1)
        prepared = q._prepared["queue_pop", 7]
        assert (prepared.sender is not None) == (direct and target.kind == "single")
        flush(target)
        second = q.claim(1, done_request=first.request)  # two request keys: another head
        assert [t.id for t in (*first.tasks, *second.tasks)] == ["a", "b"]
        assert q._prepared["queue_pop", 7] is prepared
        assert q._prepared["queue_pop", 8].head[2] == len(q.script_keys) + 8
        assert q.ack([*first.tasks, *second.tasks]) == 2
        assert q.stats()["in_flight"] == 0


def test_a_bad_resend_is_refused_before_anything_is_sent(target: RedisTarget) -> None:
    batch = Batch(target.raw)
    batch.command("SET", "untouched", "1")
    with pytest.raises(InvalidArgument, match="resend"):
        batch.execute(resend="all")  # type: ignore[arg-type]
    assert target.raw.exists("untouched") == 0


def test_one_call_on_a_queue_alias_loads_its_script_blocking_and_asyncio(
    target: RedisTarget,
) -> None:
    from django_redislock.queue.sending import run_call, run_call_async
    from django_redislock.queue.workers import registry_keys

    backend = target.queue_backend()
    call = ("workers_list", registry_keys(backend), [10])
    flush(target)
    assert int(run_call(backend, call)[1]) == 0  # no worker is registered
    assert known(target, "workers_list")
    flush(target)
    assert int(asyncio.run(run_call_async(backend, call))[1]) == 0
    assert known(target, "workers_list")
