"""Guarantees across real processes: mutual exclusion, and a holder paused past its TTL."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from .conftest import RedisTarget

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow


@pytest.fixture(params=["single", "cluster"])
def real_target(request: pytest.FixtureRequest) -> RedisTarget:
    """Cross-process tests need a real server: fakeredis lives inside one process."""
    target: RedisTarget = request.getfixturevalue(f"{request.param}_target")
    return target


def start(mode: str, **args: Any) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.lock_worker", mode, json.dumps(args)],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def finish(process: subprocess.Popen[str], timeout: float = 120) -> dict[str, Any]:
    out, _ = process.communicate(timeout=timeout)
    assert process.returncode == 0, out
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return result


def read_line(process: subprocess.Popen[str]) -> dict[str, Any]:
    assert process.stdout is not None
    line: dict[str, Any] = json.loads(process.stdout.readline())
    return line


def test_mutual_exclusion_across_processes(real_target: RedisTarget) -> None:
    target = {"location": real_target.location, "options": real_target.options}
    workers = [
        start("count", **target, name="counter-lock", counter="{c}:n", n=500) for _ in range(4)
    ]
    for worker in workers:
        finish(worker)
    assert int(real_target.raw.get("{c}:n")) == 2000


def test_readers_and_writers_across_processes(real_target: RedisTarget) -> None:
    target = {"location": real_target.location, "options": real_target.options}
    common = {**target, "name": "rw-lock", "counter": "{c}:n"}
    workers = [start("count", **common, kind="write", n=400) for _ in range(2)]
    workers += [start("count", **common, kind="read", n=400) for _ in range(2)]
    results = [finish(worker) for worker in workers]
    assert int(real_target.raw.get("{c}:n")) == 800
    assert [r["unstable"] for r in results[2:]] == [0, 0]


def test_holder_paused_past_its_ttl_cannot_damage_data(
    real_target: RedisTarget, tmp_path: Path
) -> None:
    db = str(tmp_path / "fenced.sqlite3")
    target = {"location": real_target.location, "options": real_target.options, "db": db}
    record = {"name": "stock-lock", "record": "sku-1"}
    finish(start("setup-db", **target, **record))
    paused = start("pause", **target, **record, ttl=0.5)
    old_fence = read_line(paused)["fence"]
    paused.send_signal(signal.SIGSTOP)
    try:
        time.sleep(0.7)  # past the paused holder's TTL
        newer = start("hold", **target, **record)
        taken = read_line(newer)
        assert taken["fence"] > old_fence and taken["applied"] is True
    finally:
        paused.send_signal(signal.SIGCONT)
    assert paused.stdin is not None
    paused.stdin.write("go\n")
    paused.stdin.flush()
    outcome = finish(paused)
    assert outcome == {"applied": False, "ensure_held": "LockLost", "release": "LockLost"}
    assert newer.stdin is not None
    newer.stdin.write("go\n")
    newer.stdin.flush()
    assert finish(newer) == {"owned_after": True}
    with sqlite3.connect(db) as conn:
        row = conn.execute("SELECT value, fence FROM testapp_fencedrecord").fetchone()
    assert row == ("new holder", taken["fence"])
