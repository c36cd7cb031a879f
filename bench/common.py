"""What every benchmark shares: a private server, timing, tables and JSON results.

A benchmark module exposes ``run(server: RedisProcess, quick: bool) -> dict`` returning
``{"name": ..., "rows": [{"library": ..., metric: value, ...}], "notes": [...]}``;
:func:`save` writes it to ``bench/results/<name>.json`` with the machine, versions and date.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import platform
import statistics
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import datetime, timezone
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")
RESULTS = Path(__file__).resolve().parent / "results"
PACKAGES = (
    "django-redislock",
    "redis",
    "Django",
    "python-redis-lock",
    "pottery",
    "rq",
    "huey",
    "dramatiq",
    "arq",
    "celery",
    "hiredis",
)


def machine() -> dict[str, Any]:
    """Where and with what a run happened, stored next to its numbers."""
    versions = {}
    for name in PACKAGES:
        with contextlib.suppress(PackageNotFoundError):
            versions[name] = version(name)
    return {
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "packages": versions,
    }


def rate(fn: Callable[[], Any], *, seconds: float = 1.0, max_calls: int = 1_000_000) -> float:
    """Calls per second of ``fn`` over about ``seconds`` (bounded by ``max_calls``)."""
    calls = 0
    start = time.perf_counter()
    deadline = start + seconds
    while calls < max_calls:
        fn()
        calls += 1
        if calls % 16 == 0 and time.perf_counter() >= deadline:
            break
    return calls / (time.perf_counter() - start)


def interleaved(
    cases: Mapping[str, Callable[[], Any]], *, seconds: float, rounds: int, slice_s: float = 0.05
) -> list[dict[str, float]]:
    """Calls/s of each case in each of ``rounds`` rounds, the cases taking turns.

    A round gives every case about ``seconds``, in slices of ``slice_s`` that take turns
    (the order rotated by one each round and reversed every other turn), so a burst of
    load from a neighbour hits every case alike and ratios taken within one round compare
    like with like. Returns one ``{case: calls/s}`` per round.
    """
    names = list(cases)
    found = []
    for n in range(rounds):
        order = rotated(names, n)
        calls = dict.fromkeys(names, 0)
        spent = dict.fromkeys(names, 0.0)
        turn = 0
        while min(spent.values()) < seconds:
            for name in order if turn % 2 == 0 else order[::-1]:
                fn = cases[name]
                start = time.perf_counter()
                end = start + slice_s
                done = 0
                while True:
                    fn()
                    done += 1
                    if done % 8 == 0 and time.perf_counter() >= end:
                        break
                spent[name] += time.perf_counter() - start
                calls[name] += done
            turn += 1
        found.append({name: calls[name] / spent[name] for name in names})
    return found


def rotated(items: Sequence[T], n: int) -> list[T]:
    """``items`` rotated left by ``n``: round ``n``'s order in interleaved rounds."""
    k = n % len(items) if items else 0
    return [*items[k:], *items[:k]]


class LoadAverage:
    """The 1-minute load average, sampled at the start of a run and after each round.

    Every table of rounds notes it (:meth:`note`): a neighbour's load moves the absolute
    figures, so the reader needs it to judge them.
    """

    def __init__(self) -> None:
        self.samples = [os.getloadavg()[0]]

    def sample(self) -> None:
        self.samples.append(os.getloadavg()[0])

    def note(self) -> str:
        """``1-minute load average LOW-HIGH on N CPUs`` over the samples taken."""
        low, high = min(self.samples), max(self.samples)
        return f"1-minute load average {low:.1f}-{high:.1f} on {os.cpu_count()} CPUs"


def spread(values: Sequence[float], digits: str = ".2f") -> str:
    """``median (min-max)`` of ``values``, for tables of rounds."""
    return f"{median(values):{digits}} ({min(values):{digits}}-{max(values):{digits}})"


def between(values: Sequence[float], digits: str = ",.0f") -> str:
    """``min-max`` of ``values``: the range beside a median."""
    return f"{min(values):{digits}}-{max(values):{digits}}"


def percentile(values: Sequence[float], pct: float) -> float:
    """The ``pct`` percentile of ``values`` (nearest rank)."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(pct / 100 * len(ordered)) - 1))
    return ordered[index]


def median(values: Iterable[float]) -> float:
    return statistics.median(list(values))


def table(rows: Sequence[Mapping[str, Any]], columns: Sequence[str]) -> str:
    """A Markdown table of ``rows`` (floats with 3 significant digits, NaN as "n/a")."""

    def cell(value: Any) -> str:
        if isinstance(value, float) and math.isnan(value):
            return "n/a"  # a figure the library does not have (NaN in the JSON)
        if isinstance(value, float):
            return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"
        return str(value)

    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(cell(row.get(col, "")) for col in columns) + " |" for row in rows]
    return "\n".join(lines)


def save(result: dict[str, Any]) -> Path:
    """Write ``result`` with the machine facts to ``bench/results/<name>.json``."""
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{result['name']}.json"
    path.write_text(json.dumps({**result, "machine": machine()}, indent=2) + "\n")
    return path


@contextlib.contextmanager
def round_trips() -> Iterator[list[int]]:
    """Count requests redis-py sends in this process (a pipeline is one).

    The handshake of a new connection (``CLIENT SETINFO``, ``HELLO``, ``SELECT``) is left
    out: whether a run opens a connection depends on what ran before it in the process, not
    on the work it does.
    """
    from redis.connection import AbstractConnection

    counter = [0]
    handshaking = threading.local()
    original = AbstractConnection.send_packed_command
    # redis-py 5.x connects in connect(); later versions in connect_check_health()
    name = (
        "connect_check_health" if hasattr(AbstractConnection, "connect_check_health") else "connect"
    )
    original_connect = getattr(AbstractConnection, name)

    def counting(self: Any, command: Any, check_health: bool = True) -> None:
        if not getattr(handshaking, "on", False):
            counter[0] += 1
        original(self, command, check_health)

    def connecting(self: Any, *args: Any, **kwargs: Any) -> Any:
        handshaking.on = True
        try:
            return original_connect(self, *args, **kwargs)
        finally:
            handshaking.on = False

    AbstractConnection.send_packed_command = counting  # type: ignore[method-assign]
    setattr(AbstractConnection, name, connecting)
    try:
        yield counter
    finally:
        AbstractConnection.send_packed_command = original  # type: ignore[method-assign]
        setattr(AbstractConnection, name, original_connect)


class CommandCounter:
    """Counts commands a server executed (``INFO commandstats``), for round-trip figures."""

    def __init__(self, client: Any) -> None:
        self.client = client

    def total(self) -> int:
        stats = self.client.info("commandstats")
        return sum(int(v["calls"]) for k, v in stats.items() if k != "cmdstat_info")

    def reset(self) -> None:
        self.client.config_resetstat()


def reply_parser() -> str:
    """Which reply parser redis-py uses here (every library in the run, and every process
    it forks, uses the same one): a figure measured with hiredis is not one without it."""
    from redis.utils import HIREDIS_AVAILABLE

    if HIREDIS_AVAILABLE:
        return f"hiredis {version('hiredis')}"
    return "redis-py's own Python parser (hiredis is not installed)"
