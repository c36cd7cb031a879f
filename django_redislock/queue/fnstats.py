"""Per task function: runs, failures and runtime percentiles over the last hour and day.

Kept per queue in ONE hash (``Queue.fnstats_key``, under the queue's hash tag),
laid out in ``scripts/fragments/fnstats.lua``: 12 five-minute slots (the hour) and
24 one-hour slots (the day), each with, per function seen in it (at most
:data:`NAMES`; later names count as ``(other)``), its runs, failed runs and a
runtime histogram of 4 bins per doubling (a bin spans a factor of 2^(1/4), about
1.19: a percentile is the geometric middle of its bin, within 9 % of the true
value). Runtimes are clamped to [16 µs, 2^34 µs (4.8 h)], so a histogram has at
most :data:`MAX_BINS` bins. One field per function and slot holds its runs, failed
runs and histogram as a JSON array (``[runs, failed, bin, count, ...]``), so a slot is at most
22 fields and the hash at most 36 x 22. A slot is cleared when its time comes round
again, so the hash is bounded whatever the queue does (bytes measured in
docs/admin.md).

"The last hour" is the current five-minute slot and the 11 before it (55 to 60
minutes), "the last day" the current hour and the 23 before it (23 to 24 hours).

Written by the worker, per queue, once a second in the batch that also adds to
the outcome counters and rate buckets (:func:`add_to_pipeline`): no round trip
of its own and no Redis work per task (the worker tallies in memory). Like those
counters, a worker killed with SIGKILL loses at most its last second, a lease
that expires (its worker died) is no run here, and tasks acked by code of your
own (``pop``/``ack`` without the worker) are not counted. A failed run is one
that raised (retried or dead-lettered); a run of a task whose payload cannot be
decoded or whose module cannot be imported counts as a failed run of its named
function (``?`` when it names none) without a runtime.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from ..calls.batch import Batch
from ..wire import to_text

#: Function names kept per slot (as in ``fragments/fnstats.lua``).
NAMES = 20
#: Histogram bins per doubling of the runtime in µs, and the bins kept.
PER_DOUBLING = 4
LOW_BIN, HIGH_BIN = 4 * PER_DOUBLING, 34 * PER_DOUBLING
MAX_BINS = HIGH_BIN - LOW_BIN + 1
#: Percentiles read, in thousandths.
PERCENTILES = (500, 950)


def bin_of(seconds: float) -> int:
    """The histogram bin of a runtime (clamped to [16 µs, 4.8 h]); on the worker's hot path."""
    micros = seconds * 1e6
    if micros < 16:
        return LOW_BIN
    bin = int(_log2(micros) * PER_DOUBLING)
    return bin if bin < HIGH_BIN else HIGH_BIN


_log2 = math.log2


def bin_seconds(bin: int) -> float:
    """The runtime a bin stands for: the geometric middle of its range, in seconds."""
    return float(2 ** ((bin + 0.5) / PER_DOUBLING) / 1e6)


@dataclass
class Tally:
    """One function's runs of the last second in one worker (not thread-safe: the worker
    changes it under its lock)."""

    runs: int = 0
    failed: int = 0
    #: histogram bin -> runs
    bins: dict[int, int] = field(default_factory=dict)

    def add(self, runtime: float | None, failed: bool) -> None:
        self.runs += 1
        if failed:
            self.failed += 1
        if runtime is not None:
            bin = bin_of(runtime)
            self.bins[bin] = self.bins.get(bin, 0) + 1

    def merge(self, other: Tally) -> None:
        """Add ``other``'s counts (a batch that was not sent, counted again next time)."""
        self.runs += other.runs
        self.failed += other.failed
        for bin, n in other.bins.items():
            self.bins[bin] = self.bins.get(bin, 0) + n


def add_to_pipeline(batch: Batch, queue: Any, tallies: dict[str, Tally]) -> None:
    """Add the call that adds ``tallies`` (function -> :class:`Tally`) to ``batch``.

    An ``EVALSHA`` like the worker's other calls of its outcome batch (sent with
    ``resend="missing"``: after ``NOSCRIPT`` only the calls that did not run are sent
    again, so nothing is counted twice).
    """
    if not tallies:
        return
    args: list[Any] = []
    for name, tally in tallies.items():
        args += [name, tally.runs, tally.failed, len(tally.bins)]
        for bin, n in tally.bins.items():
            args += [bin, n]
    batch.add("fnstats_add", [queue.fnstats_key], args)


@dataclass(frozen=True)
class Window:
    """One function's runs over a window (the hour or the day)."""

    runs: int
    failed: int
    #: Runs whose runtime is known (the percentiles are of these).
    timed: int
    #: Runtime percentiles (seconds), as :data:`PERCENTILES`; None when no run was timed.
    p50: float | None
    p95: float | None

    @property
    def failure_rate(self) -> float | None:
        """Failed runs / runs (0..1), or None without runs."""
        return self.failed / self.runs if self.runs else None


@dataclass(frozen=True)
class FunctionStats:
    """A task function's numbers over the last hour and the last day."""

    name: str
    hour: Window
    day: Window


def read_call(queue: Any) -> tuple[str, list[str], list[Any]]:
    """The read script of ``queue``, to send in the pipeline of a page's other scripts."""
    return ("fnstats_read", [queue.fnstats_key], list(PERCENTILES))


def parse(reply: Any) -> list[FunctionStats]:
    """The read script's reply, busiest function of the day first."""
    flat = list(reply[1:])
    width = 7 + 2 * len(PERCENTILES)
    found = []

    def seconds(value: Any) -> float | None:
        bin = int(value)
        return None if bin < 0 else bin_seconds(bin)

    for i in range(0, len(flat) - width + 1, width):
        name, hour_n, hour_x, day_n, day_x, hour_t, day_t, h50, h95, d50, d95 = flat[i : i + width]
        found.append(
            FunctionStats(
                to_text(name),
                Window(int(hour_n), int(hour_x), int(hour_t), seconds(h50), seconds(h95)),
                Window(int(day_n), int(day_x), int(day_t), seconds(d50), seconds(d95)),
            )
        )
    return sorted(found, key=lambda s: (-s.day.runs, -s.hour.runs, s.name))


def read(queue: Any) -> list[FunctionStats]:
    """Every function's numbers of ``queue`` now (one script call)."""
    name, keys, args = read_call(queue)
    with queue.backend.errors():
        reply = queue.backend.script(name)(keys=keys, args=args)
    return parse(reply)
