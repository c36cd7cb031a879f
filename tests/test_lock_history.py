"""The lock history check under faults (issue 23), a short run per kind.

Four worker processes run seeded random lock operations (mutex, reentrant with inner
levels, read-write with downgrades, ``owner=`` reuse, asyncio acquires cancelled once or
again and again, permits of semaphores of 1 and 2, a fair lock, watchdog on and off, short
TTLs)
through fault proxies while the test applies faults (lost replies, resends, lost requests,
stalls past the timeout, cuts, ``SIGSTOP`` past the TTL, ``SCRIPT FLUSH``, ``CLIENT
PAUSE``, restarts with AOF); every exclusive hold makes a fenced write to one database row
per name. :mod:`tests.lockhistory.checker` then
verifies the whole history. ``python3 dev.py soak locks --minutes N`` runs it longer.

The assertions are counts (operations, holds, faults, violations), never durations.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from .lockhistory.run import fault_names, run

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

#: Long enough for every type of fault at least once (the faults come in rounds, each type
#: once per round, one every 0.15-0.6 s); the soak (``dev.py soak locks``) runs for longer.
SECONDS = 10


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """A directory with a short path: its servers' Unix sockets must stay under 108 bytes,
    which a pytest-xdist ``tmp_path`` (``/tmp/pytest-of-root/pytest-N/popen-gwN/...``) is not."""
    path = Path(tempfile.mkdtemp(prefix="lh-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.mark.parametrize("kind", ["single", "cluster", "redlock"])
def test_lock_history_under_faults_has_no_violation(kind: str, short_dir: Path) -> None:
    report, where = run(kind, SECONDS, directory=short_dir / "h", eviction=kind == "single")
    print(report.table())
    assert not report.violations, f"history in {where}:\n{report.table()}"
    assert sum(report.holds.values()) >= 20, report.table()
    assert sum(report.writes.values()) >= 10, report.table()
    assert sum(report.faults.values()) >= 10, report.table()
    assert set(fault_names(kind)) <= set(report.faults), report.table()  # every type
    assert not [f for f in report.faults if f.startswith("worker")], report.table()


@pytest.mark.parametrize("kind", ["single", "cluster"])
def test_fair_lock_order_under_faults_has_no_violation(kind: str, short_dir: Path) -> None:
    """Fair-lock operations only, so that the workers queue behind each other often: grant
    order = arrival order among live waiters (issue 30), under the same faults."""
    report, where = run(kind, SECONDS, directory=short_dir / "h", only=("fair",))
    print(report.table())
    assert not report.violations, f"history in {where}:\n{report.table()}"
    # counts a loaded machine still reaches (about 30 queued waiters in an unloaded run)
    assert report.fair["queued (arrival acknowledged)"] >= 3, report.table()
    assert report.fair["granted after queueing"] >= 1, report.table()
    assert sum(report.faults.values()) >= 5, report.table()


def test_the_fair_order_check_catches_a_lifo_fair_lock(
    short_dir: Path,
) -> None:
    """The order check can fail: the same run with the fair lock's scripts mutated to grant
    the last waiter first (``MUTATIONS["fair-lifo"]``), fair-lock operations only."""
    report, where = run(
        "single", SECONDS, directory=short_dir / "h", only=("fair",), mutate="fair-lifo"
    )
    print(report.table())
    assert report.by_type["fair grant out of arrival order"] >= 1, f"{where}:\n{report.table()}"
    assert set(report.by_type) == {"fair grant out of arrival order"}, report.table()
