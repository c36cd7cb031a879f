"""``python3 dev.py demo`` end to end, with smaller numbers: its report and exit code."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow


def row(report: str, name: str) -> str:
    found = re.search(rf"^{re.escape(name)}\s+(.+)$", report, re.MULTILINE)
    assert found, f"no {name!r} line in:\n{report}"
    return found.group(1).strip()


def test_the_demo_sells_exactly_its_units_and_reports_it(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    data = tmp_path_factory.mktemp("demo")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "SHOP_"))}
    env.pop("DATABASE_URL", None)
    command = [sys.executable, str(ROOT / "example_project" / "demo.py")]
    command += ["--units", "15", "--buyers", "60", "--workers", "2", "--concurrency", "8"]
    command += ["--data-dir", str(data), "--seed", "3"]
    result = subprocess.run(
        command, check=False, env=env, capture_output=True, text=True, timeout=240
    )
    report = result.stdout
    assert result.returncode == 0, report + result.stderr[-3000:]
    assert row(report, "requests") == "66"
    assert row(report, "sold (202)") == "15"
    assert row(report, "orders in the database") == "15"
    refused = int(row(report, "sold out (409)")) + int(row(report, "duplicates refused (409)"))
    assert refused == 51
    # every order run succeeded the first time: none failed on "database is locked"
    assert row(report, "failed order runs (retried)") == "0"
    for name in ("oversold units", "duplicate orders", "sold units without an order"):
        assert row(report, name) == "0"
    assert "All invariants hold" in report and "/admin/" in report
    assert not (data / "redis" / "redis.sock").exists()  # the embedded server was stopped


@pytest.mark.parametrize(
    "where", [["--shards", "3"], ["--cluster"]], ids=["one-server", "three-masters"]
)
def test_the_demo_over_three_buckets_sells_every_unit_of_every_bucket(
    tmp_path_factory: pytest.TempPathFactory, where: list[str]
) -> None:
    """``--shards 3``: the sale is split over 3 buckets and every bucket's order queue drained.

    ``--cluster`` (3 buckets by default) runs it on a 3-master cluster, a bucket per master.
    """
    data = tmp_path_factory.mktemp("demo-shards")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "SHOP_"))}
    env.pop("DATABASE_URL", None)
    command = [sys.executable, str(ROOT / "example_project" / "demo.py"), *where]
    command += ["--units", "15", "--buyers", "60", "--workers", "2", "--concurrency", "8"]
    command += ["--data-dir", str(data), "--seed", "3"]
    result = subprocess.run(
        command, check=False, env=env, capture_output=True, text=True, timeout=240
    )
    report = result.stdout
    assert result.returncode == 0, report + result.stderr[-3000:]
    assert "order queues orders, orders.s1, orders.s2" in report
    assert row(report, "sold (202)") == "15"
    assert row(report, "orders in the database") == "15"
    assert row(report, "units left in Redis") == "0"
    for name in (
        "oversold units",
        "duplicate orders",
        "sold units without an order",
        "units unsold after a sold-out",
        "drain_queue exit code",
    ):
        assert row(report, name) == "0"
    cells = r"^(\d)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(orders\S*)$"
    buckets = re.findall(cells, report, re.M)
    # each bucket's duplicates are counted by its take script: together, the 409s for them
    assert sum(int(b[5]) for b in buckets) == int(row(report, "duplicates refused (409)"))
    assert [(b[0], b[1], b[2], b[6]) for b in buckets] == [
        ("0", "0", "5", "orders"),
        ("1", "0", "5", "orders.s1"),
        ("2", "0", "5", "orders.s2"),
    ]
    assert "All invariants hold" in report
    assert not (data / "redis" / "redis.sock").exists()
    if "--cluster" in where:
        masters = re.search(r"^buckets on masters: .* \((\d) distinct\)$", report, re.M)
        assert masters and masters.group(1) == "3", report
        assert not list(data.glob("cluster-*"))  # the cluster was stopped and removed
