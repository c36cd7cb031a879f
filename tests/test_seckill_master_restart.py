"""A sharded sale on a 3-master cluster whose masters write every command to their AOF: one
master is SIGKILLed and restarted from its AOF mid-sale, and an order worker is SIGKILLed.

The sale is 60 units over 3 buckets, bought by 2 buyer processes (4 threads each) for 300
distinct buyers: demand is 5x the supply. While the master holding bucket 1 is down, the
takes that reach its bucket fail with ``ConnectionFailed`` (the buyers print an ``error``
line and try again, boundedly); the other buckets keep selling. ``appendfsync always``
means every take the master answered is in its AOF, so the restarted master resumes with
exactly the units it had sold. At the end, after a recovery drain of every bucket's
order queue: 0 oversold, 0 left in any bucket, every unit sold has exactly one order, no
buyer has two, and ``reconcile()`` finds the books clean.
"""

from __future__ import annotations

import json
import random
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from django_redislock.exceptions import ConnectionFailed
from django_redislock.inventory import Stock

from .conftest import RedisTarget
from .processes import OUTAGE_OPTIONS, wait_for
from .servers import RedisProcess, start_cluster, wait_cluster_ok
from .test_seckill import ROOT, answers, drain_burst, drain_command, finish, process_env, spawn

pytestmark = pytest.mark.slow

UNITS = 60
SHARDS = 3
AOF = ["--appendonly", "yes", "--appendfsync", "always"]


@pytest.fixture
def aof_cluster(tmp_path: Path) -> Iterator[list[RedisProcess]]:
    nodes = start_cluster(tmp_path / "cluster", extra=AOF)
    try:
        yield nodes
    finally:
        for node in nodes:
            node.stop()


def holder(nodes: list[RedisProcess], key: str) -> RedisProcess:
    """The master that serves ``key``'s hash slot."""
    slot = int(nodes[0].client().execute_command("CLUSTER", "KEYSLOT", key))
    for first, last, *owner in nodes[0].client().execute_command("CLUSTER", "SLOTS"):
        if first <= slot <= last:
            port = int(owner[0][1])
            return next(node for node in nodes if node.port == port)
    raise AssertionError(f"no master serves slot {slot}")


def units_on(node: RedisProcess, key: str) -> int:
    return int(node.client().get(key) or 0)


def start_worker(env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    """An order worker draining every bucket's order queue (its output in ``log``)."""
    with log.open("wb") as output:
        return subprocess.Popen(
            drain_command("--lease", "1", "--batch", "5", shards=SHARDS),
            cwd=ROOT,
            env=env,
            stdout=output,
            stderr=subprocess.STDOUT,
        )


def start_buyers(env: dict[str, str], sale_id: str, buyers: list[str]) -> subprocess.Popen[str]:
    """A buyer process of 4 threads that tries a take again after ``ConnectionFailed``."""
    options = ["--threads", "4", "--pause", "0.02", "--retries", "100"]
    return spawn(env, "buy", "--sale", sale_id, *options, "--buyers", ",".join(buyers))


def buyers_answers(process: subprocess.Popen[str]) -> list[list[Any]]:
    """Every line a buyer process printed, once it exits (each of its threads finished).

    A buyer thread that died of an error other than ``ConnectionFailed`` prints its
    traceback and answers no more, and the process still exits 0: no traceback allowed.
    """
    out, err = process.communicate(timeout=180)
    assert process.returncode == 0 and "Traceback" not in err, err[-3000:]
    return answers(out)


def test_a_slot_whose_master_is_down_is_a_connection_failure(
    cluster_target: RedisTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``CLUSTERDOWN`` (what a restarted master answers until the cluster agrees it is back,
    once redis-py's own retries are spent) is ``ConnectionFailed``, the error a buyer or a
    worker rides out, not a raw ``ClusterDownError`` that ends a buyer's thread."""
    from redis.exceptions import ClusterDownError

    backend = cluster_target.queue_backend()
    stock = Stock("phone-down", using=backend)
    stock.set(3, shards=3)

    def down(*args: object, **kwargs: object) -> object:
        raise ClusterDownError("The cluster is down")

    monkeypatch.setattr(backend.client, "execute_command", down)
    with pytest.raises(ConnectionFailed, match="unreachable"):
        stock.take(buyer="b1")
    with pytest.raises(ConnectionFailed, match="unreachable"):
        stock.remaining()


def check_invariants(state: dict[str, Any], seen: list[list[Any]], buyers: list[str]) -> None:
    """0 oversold, all sold, one order per unit sold, nobody twice, every buyer answered."""
    answered = Counter(buyer for buyer, result, _ in seen if result != "error")
    missing = [buyer for buyer in buyers if buyer not in answered]
    assert not missing, f"no answer for {missing}: {[a for a in seen if a[0] in missing]}"
    assert max(answered.values()) == 1  # one answer per buyer (its errors aside)
    orders = {number: (buyer, qty) for number, buyer, qty in state["orders"]}
    reservations = {rid: (buyer, qty) for rid, buyer, qty in state["reservations"]}
    stats = state["stats"]
    assert [bucket["remaining"] for bucket in state["buckets"]] == [0] * SHARDS  # all sold
    assert stats["remaining"] == 0 and stats["sold"] == UNITS  # 0 oversold
    assert sum(qty for _, qty in reservations.values()) == UNITS
    assert orders == reservations  # every unit sold has exactly one order, and no extra
    assert len(state["orders"]) == len(orders)
    assert len({buyer for buyer, _ in orders.values()}) == len(orders)  # nobody twice
    winners = Counter(buyer for buyer, result, _ in seen if result == "ok")
    assert max(winners.values()) == 1
    told = {reservation for _, result, reservation in seen if result == "ok"}
    assert told <= set(orders)  # every OK a buyer saw is an order (a lost reply: no OK seen)
    assert {result for _, result, _ in seen} <= {"ok", "sold_out", "already_bought", "error"}
    assert state["clean"]


def test_master_restart_from_aof_mid_sale_keeps_every_invariant(
    aof_cluster: list[RedisProcess], tmp_path: Path
) -> None:
    rng = random.Random()
    client = redis.RedisCluster(host="127.0.0.1", port=aof_cluster[0].port)
    target = RedisTarget("cluster", aof_cluster[0].url, {"CLUSTER": True, **OUTAGE_OPTIONS}, client)
    db = tmp_path / "shop.sqlite3"
    env = process_env(target, db)
    sale_id = finish(spawn(env, "setup", "--units", str(UNITS), "--shards", str(SHARDS))).strip()
    before = json.loads(finish(spawn(env, "report", "--sale", sale_id)))
    key = before["buckets"][1]["units_key"]
    victim = holder(aof_cluster, key)
    assert units_on(victim, key) == UNITS // SHARDS

    # order workers drain every bucket's queue during the whole sale (one is SIGKILLed)
    logs = [tmp_path / f"worker{i}.log" for i in range(2)]
    workers = [start_worker(env, log) for log in logs]
    # a worker rides out outages once it runs (its start checks the queues are listed)
    started = lambda: all("Draining" in log.read_text() for log in logs)  # noqa: E731
    wait_for(started, 60, "the workers' start")
    buyers = [f"r{i:03d}" for i in range(300)]
    processes = [start_buyers(env, sale_id, buyers[i::2]) for i in range(2)]
    try:
        # (no readline of "started" here: communicate() reads the pipe itself, and would
        # miss the answers a readline had buffered)
        # the master of bucket 1 dies once its bucket has sold, before it sold out
        wait_for(lambda: units_on(victim, key) < UNITS // SHARDS, 60, "a take in bucket 1")
        left_at_kill = units_on(victim, key)
        victim.kill()
        workers[0].send_signal(signal.SIGKILL)
        workers[0].wait(30)
        time.sleep(rng.uniform(0.5, 1.5))  # below the cluster's node timeout (5 s)
        victim.start()  # same port, directory, nodes.conf and AOF
        wait_cluster_ok(aof_cluster)
        assert units_on(victim, key) <= left_at_kill  # nothing acknowledged was lost
        seen = [answer for process in processes for answer in buyers_answers(process)]
        assert workers[1].poll() is None, logs[1].read_text()[-3000:]  # it rode out the restart
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.communicate(timeout=30)
        for worker in workers:
            if worker.poll() is None:
                worker.send_signal(signal.SIGTERM)
                worker.wait(60)
    time.sleep(1.2)  # the killed worker's leases run out
    drain_burst(env, SHARDS)

    state = json.loads(finish(spawn(env, "report", "--sale", sale_id)))
    results = Counter(result for _, result, _ in seen)
    print(f"\nmaster restart mid-sale: {dict(results)}, {left_at_kill} left in bucket 1 at kill")
    check_invariants(state, seen, buyers)
