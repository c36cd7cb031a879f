"""A holder under the watchdog, SIGSTOPped for longer than its TTL, then resumed.

The watchdog renews only while its process runs: stopped, the hold expires and
another process takes the lock and writes with a newer fence. On SIGCONT the
watchdog's overdue renewal finds the hold gone, so ``lock_lost`` fires, and
the fenced write the resumed holder attempts is refused by the database.
(``test_locks_processes.py`` covers the same pause with an explicit TTL.)
"""

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
from .test_locks_processes import ROOT, finish, read_line, start

pytestmark = pytest.mark.slow


def start_holder(**args: Any) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.fault_worker", "watchdog-hold", json.dumps(args)],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def test_paused_watchdog_holder_learns_it_lost_and_cannot_write(
    single_target: RedisTarget, tmp_path: Path
) -> None:
    db = str(tmp_path / "fenced.sqlite3")
    record = {"name": "watched", "record": "sku-9"}
    finish(start("setup-db", location=single_target.location, db=db, **record))
    paused = start_holder(url=single_target.location, ttl=0.6, db=db, **record)
    old_fence = read_line(paused)["fence"]
    paused.send_signal(signal.SIGSTOP)
    try:
        time.sleep(1.0)  # past the 0.6 s TTL: no renewal can happen while stopped
        newer = start("hold", location=single_target.location, db=db, **record)
        taken = read_line(newer)
        assert taken["fence"] > old_fence and taken["applied"] is True
    finally:
        paused.send_signal(signal.SIGCONT)
    assert paused.stdin is not None
    paused.stdin.write("go\n")
    paused.stdin.flush()
    assert finish(paused) == {"lost": [old_fence], "applied": False, "owned": False}
    assert newer.stdin is not None
    newer.stdin.write("go\n")
    newer.stdin.flush()
    assert finish(newer) == {"owned_after": True}
    with sqlite3.connect(db) as conn:
        row = conn.execute("SELECT value, fence FROM testapp_fencedrecord").fetchone()
    assert row == ("new holder", taken["fence"])
