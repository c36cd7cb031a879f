"""A single server restarted (SIGTERM, then SIGKILL) while locks and queues are busy.

The server persists with AOF (``appendfsync always``). Three processes take
locks and enqueue, pop and ack tasks in a loop. The test checks that they
recover without hanging, that in between they only saw this library's
exceptions, that a queue filled before the restarts is intact afterwards,
that no acknowledged task came back, and that the watchdog of this process
kept its lock alive across both restarts.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from django_redislock.backends.redis import RedisLockBackend, RedisQueueBackend

from .processes import aof_server as own_aof_server
from .servers import RedisProcess

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow


@pytest.fixture
def aof_server(tmp_path: Path) -> Iterator[RedisProcess]:
    with own_aof_server(tmp_path) as server:
        yield server


def load_worker(server: RedisProcess, n: int, tmp_path: Path) -> subprocess.Popen[str]:
    args = {
        "url": server.url,
        "worker": n,
        "stop": str(tmp_path / "stop"),
        "acked": str(tmp_path / f"acked{n}"),
        "deadline": 60,
        "options": {"SOCKET_TIMEOUT": 1.0, "SOCKET_CONNECT_TIMEOUT": 0.5},
    }
    return subprocess.Popen(
        [sys.executable, "-m", "tests.fault_worker", "redis-load", json.dumps(args)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )


def acked_lines(tmp_path: Path) -> list[str]:
    return [line for path in sorted(tmp_path.glob("acked*")) for line in path.read_text().split()]


def test_clients_recover_from_restarts_and_nothing_acked_returns(
    aof_server: RedisProcess, tmp_path: Path
) -> None:
    params: dict[str, Any] = {"LOCATION": aof_server.url, "KEY_PREFIX": "load"}
    keep = RedisQueueBackend("load", params).queue("keep")
    kept = [f"keep-{i}" for i in range(50)]
    for task_id in kept:
        keep.enqueue(task_id, payload={"id": task_id})
    watched = RedisLockBackend("load", {**params, "OPTIONS": {"DEFAULT_TTL": 3.0}})
    renewed = watched.lock("watched")  # no ttl: the watchdog renews it
    renewed.acquire()
    workers = [load_worker(aof_server, n, tmp_path) for n in range(3)]
    try:
        time.sleep(1.5)
        aof_server.stop()  # SIGTERM: a clean shutdown
        aof_server.start()
        time.sleep(1.5)
        aof_server.kill()  # SIGKILL: appendfsync always has every acknowledged write
        aof_server.start()
        acked_at_last_restart = len(acked_lines(tmp_path))
        time.sleep(2.0)
    finally:
        (tmp_path / "stop").touch()
    outputs = [w.communicate(timeout=30)[0] for w in workers]
    assert [w.returncode for w in workers] == [0, 0, 0]
    results = [json.loads(out.splitlines()[-1]) for out in outputs]
    errors = {name: count for r in results for name, count in r["errors"].items()}
    acked = acked_lines(tmp_path)
    print(
        f"\nrestart under load: {len(acked)} tasks acked, {sum(errors.values())} failed "
        f"operations {errors}, longest operation {max(r['longest'] for r in results)}s"
    )
    assert all(name.startswith("django_redislock.exceptions.") for name in errors)
    assert max(r["longest"] for r in results) < 5.0  # nobody hung
    assert len(acked) > acked_at_last_restart + 20  # work resumed after the second restart
    assert len(acked) == len(set(acked))  # no task was acknowledged twice
    load_queue = RedisQueueBackend("load", params).queue("load")
    assert [task_id for task_id in acked if load_queue.get(task_id) is not None] == []
    assert all(keep.get(task_id) is not None for task_id in kept)
    renewed.ensure_held()  # the watchdog renewed through both restarts
    renewed.release()
