"""Verify a lock history: exclusion, permits, fences, fenced writes, leftovers, the row values.

Pure Python on the records the workers and the coordinator wrote (one JSON object a line).
All times are ``time.monotonic()`` seconds, which on Linux is one system-wide clock, so the
records of every process on the machine compare directly.

Records the checker reads (other records are counted and otherwise ignored):

* ``{"ev": "op", "what": ..., "type": "invoke"|"ok"|"fail"|"unknown"}``: one operation's
  steps, for the table;
* ``{"ev": "hold", ...}``: one hold as its holder saw it (see :class:`Hold`);
* ``{"ev": "write", ...}``: one fenced write to the name's database row (see :class:`Write`);
* ``{"ev": "fair", ...}``: one acquire of a fair lock, try by try (see :class:`FairWait`);
* ``{"ev": "fault", "type": ...}``: a fault the coordinator applied;
* ``{"ev": "final", "rows": {name: value}, "leftover": [...]}``: the database rows, and the
  lock keys still present one longest TTL (plus a margin) after every worker exited.

**What a holder may believe.** A hold is believed from the moment its acquire returned
(``ok``) until the first of: its release was sent, it was told of a loss (``lost_at``: the
``lock_lost`` signal, or ``LockLost`` from ``ensure_held``/``extend``), and ``until``, the
latest deadline the holder has evidence for. The worker computes ``until`` the way the
library does: for a single server or a cluster, the send time of the last call that set the
TTL (the acquire, a successful ``extend``, a successful watchdog renewal) plus that TTL,
minus :data:`MARGIN` (Redis keeps TTLs in whole milliseconds); for Redlock, the validity the
lock computed itself (``ttl - elapsed - drift``). A process stopped past its TTL therefore
believes nothing past ``until``: what it does after it resumes is the case fencing covers,
not a double grant.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .fairorder import FairWait, fair_order
from .records import MARGIN, Hold, Violation, Write

__all__ = ["MARGIN", "Hold", "Report", "Violation", "Write", "check", "read_history"]


@dataclass
class Report:
    """What the checker found, and the counts of the table."""

    violations: list[Violation] = field(default_factory=list)
    ops: Counter[str] = field(default_factory=Counter)
    holds: Counter[str] = field(default_factory=Counter)
    faults: Counter[str] = field(default_factory=Counter)
    writes: Counter[str] = field(default_factory=Counter)
    expected: Counter[str] = field(default_factory=Counter)
    fair: Counter[str] = field(default_factory=Counter)
    orphans: Counter[str] = field(default_factory=Counter)
    seed: int | None = None

    @property
    def by_type(self) -> Counter[str]:
        return Counter(v.type for v in self.violations)

    def table(self) -> str:
        """The table ``dev.py soak`` prints."""
        lines: list[str] = [] if self.seed is None else [f"seed: {self.seed}"]

        def section(title: str, counts: Counter[str]) -> None:
            lines.append(f"{title}: {sum(counts.values())}")
            for key, value in sorted(counts.items()):
                lines.append(f"  {key:<40} {value:>8}")

        section("operations", self.ops)
        section("holds", self.holds)
        section("fenced writes", self.writes)
        section("faults applied", self.faults)
        section("fair-lock order check (acquires, queued, granted after queueing)", self.fair)
        section("violations", self.by_type)
        if self.expected:
            section("expected without the system check (not a pass)", self.expected)
        section("grants seen for 0.25 s or more that no holder had (end by TTL)", self.orphans)
        for violation in self.violations[:20]:
            lines.append(f"  ! {violation}")
        return "\n".join(lines)


def read_history(paths: Iterable[Path]) -> list[dict[str, Any]]:
    """Every record of the history files; a torn last line (a killed process) is skipped."""
    records: list[dict[str, Any]] = []
    for path in paths:
        for line in Path(path).read_text().splitlines():
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return records


def _overlaps(holds: list[Hold]) -> list[Violation]:
    found: list[Violation] = []
    by_name: dict[str, list[Hold]] = defaultdict(list)
    for hold in holds:
        if hold.end > hold.ok and hold.mode != "p":
            by_name[hold.name].append(hold)
    for name, items in by_name.items():
        items.sort(key=lambda h: h.ok)
        for i, a in enumerate(items):
            for b in items[i + 1 :]:
                if b.ok >= a.end:
                    break  # sorted by start: no later hold starts before a ends
                if a.identity == b.identity or (a.mode == "r" and b.mode == "r"):
                    continue
                if b.ok < a.end and a.ok < b.end:
                    both = min(a.end, b.end) - b.ok
                    found.append(
                        Violation(
                            "overlap",
                            name,
                            f"{a.kind} fence {a.fence} ({a.worker}) and {b.kind} fence {b.fence} "
                            f"({b.worker}) both believed held for {both * 1000:.1f} ms",
                            [a, b],
                        )
                    )
    return found


def _permits(holds: list[Hold]) -> list[Violation]:
    """A semaphore's permits: never more believed at once than its ``permits``.

    A sweep over the believed intervals of each semaphore's permits; at equal times an end
    comes before a start (a permit handed on at the instant it ended is not an excess).
    """
    found: list[Violation] = []
    by_name: dict[str, list[Hold]] = defaultdict(list)
    for hold in holds:
        if hold.mode == "p" and hold.end > hold.ok:
            by_name[hold.name].append(hold)
    for name, items in by_name.items():
        events = sorted(
            [(h.end, 0, i) for i, h in enumerate(items)]
            + [(h.ok, 1, i) for i, h in enumerate(items)]
        )
        live: set[int] = set()
        for _, starts, i in events:
            if not starts:
                live.discard(i)
                continue
            live.add(i)
            limit = min(items[j].permits for j in live)
            if len(live) > limit:
                both = sorted(live, key=lambda j: items[j].ok)
                who = ", ".join(f"fence {items[j].fence} ({items[j].worker})" for j in both)
                found.append(
                    Violation(
                        "more holders than permits",
                        name,
                        f"{len(live)} permits believed held at once, of {limit}: {who}",
                        [items[j] for j in both],
                    )
                )
    return found


def _fences(holds: list[Hold]) -> list[Violation]:
    """A grant that completed before another was sent has the smaller fence; no fence twice."""
    found: list[Violation] = []
    by_name: dict[str, list[Hold]] = defaultdict(list)
    for hold in holds:
        by_name[hold.name].append(hold)
    for name, items in by_name.items():
        owners: dict[int, str] = {}
        for hold in items:
            if not hold.fresh:
                continue
            other = owners.setdefault(hold.fence, hold.identity)
            if other != hold.identity:
                found.append(
                    Violation("fence reused", name, f"fence {hold.fence} granted twice", [hold])
                )
        done = sorted(items, key=lambda h: h.ok)
        sent = sorted((h for h in items if h.fresh), key=lambda h: h.invoke)
        # the largest fence among holds whose acquire returned before each fresh send
        best: Hold | None = None
        j = 0
        for b in sent:
            while j < len(done) and done[j].ok < b.invoke:
                if best is None or done[j].fence > best.fence:
                    best = done[j]
                j += 1
            if best is not None and best.identity != b.identity and best.fence >= b.fence:
                found.append(
                    Violation(
                        "fence went back",
                        name,
                        f"fence {b.fence} ({b.worker}) sent after fence {best.fence} "
                        f"({best.worker}) was granted",
                        [best, b],
                    )
                )
    return found


def _writes(writes: list[Write], rows: dict[str, int] | None, holds: list[Hold]) -> list[Violation]:
    found: list[Violation] = []
    by_name: dict[str, list[Write]] = defaultdict(list)
    for write in writes:
        by_name[write.name].append(write)
    for name, items in by_name.items():
        accepted = sorted((w for w in items if w.accepted), key=lambda w: w.done)
        best: Write | None = None
        j = 0
        for w in sorted(items, key=lambda w: w.invoke):
            while j < len(accepted) and accepted[j].done < w.invoke:
                if best is None or accepted[j].fence > best.fence:
                    best = accepted[j]
                j += 1
            if w.accepted and best is not None and best.fence >= w.fence:
                found.append(
                    Violation(
                        "stale fenced write accepted",
                        name,
                        f"fence {w.fence} ({w.worker}) written after fence {best.fence}",
                        [best, w],
                    )
                )
    ends = {(h.name, h.fence): h.end for h in holds if h.fresh and h.mode == "x"}
    for name, value in (rows or {}).items():
        accepted = [w for w in by_name.get(name, []) if w.accepted]
        excused = _late_overlapping(accepted, ends)
        if not len(accepted) - len(excused) <= int(value) <= len(accepted):
            found.append(
                Violation(
                    "row value mismatch",
                    name,
                    f"the row holds {value} but {len(accepted)} fenced writes were accepted "
                    f"({len(excused)} of them finished after their hold's believed end) "
                    "(an update was lost: two writers read the same value)",
                    accepted,
                )
            )
    return found


def _late_overlapping(accepted: list[Write], ends: dict[tuple[str, int], float]) -> list[Write]:
    """The accepted writes that may have lost an update without a double grant.

    The worker's write reads the row, then updates it where the fence is older (two
    statements, so that a double grant shows as a lost update). A holder stopped between
    the two past its TTL reads under its hold and writes after it: its update still passes
    the fence check when the newer holder has read but not yet written, and one of the two
    increments is lost. That is the pause fencing cannot cover when the read is not fenced
    (the library's ``fenced_update`` is one statement, ``F()`` included, for this reason),
    so such a write may explain one missing increment when another accepted write overlaps
    it. Every other lost update is a violation.
    """
    late = []
    for w in accepted:
        end = ends.get((w.name, w.fence))
        if end is None or w.done <= end:
            continue
        if any(o is not w and o.invoke < w.done and w.invoke < o.done for o in accepted):
            late.append(w)
    return late


def _leftovers(final: dict[str, Any] | None) -> list[Violation]:
    return [
        Violation("hold outlived its TTL", item.get("name", "?"), json.dumps(item), [item])
        for item in (final or {}).get("leftover", [])
    ]


#: Seconds after an orphan grant was first seen in which the outcome of the call that made
#: it arrives (its resends and take-back included), and before it (clock granularity).
ORPHAN_WINDOW = (1.0, 6.0)
#: A grant seen for less than this is one being taken back (e.g. Redlock's background
#: clean-up after a cancellation), not one left behind.
ORPHAN_MIN_SPAN = 0.25


def _orphans(
    grants: list[dict[str, Any]], holds: list[Hold], ends: list[dict[str, Any]]
) -> Counter[str]:
    """Grants seen in Redis for a while that no worker reported holding, by a likely cause.

    Documented: an acquire whose outcome stayed unknown (Redis unreachable) may leave its
    grant until its TTL. A cancelled acquire leaves nothing unless its take-back could not
    reach Redis either (under these faults it sometimes cannot), so these are counted, not
    judged.
    """
    held = {(h.name, h.fence) for h in holds}
    seen: dict[tuple[str, int], list[float]] = {}
    for grant in grants:
        key = (grant["name"], int(grant["fence"]))
        if key not in held:
            seen.setdefault(key, []).append(float(grant["t"]))
    found: Counter[str] = Counter()
    for (name, _), times in seen.items():
        if max(times) - min(times) < ORPHAN_MIN_SPAN:
            continue
        t = min(times)
        before, after = ORPHAN_WINDOW
        near = [e for e in ends if e.get("name") == name and t - before <= e["t"] <= t + after]
        if any(e["type"] == "unknown" for e in near):
            found["after an acquire with an unknown outcome"] += 1
        elif any(e.get("error") == "cancelled" for e in near):
            found["after a cancelled acquire"] += 1
        else:
            found["other (e.g. a resent acquire whose first grant expired meanwhile)"] += 1
    return found


def check(records: Iterable[dict[str, Any]]) -> Report:
    """Check a whole history; the report's ``violations`` is empty when it passes."""
    report = Report()
    holds: list[Hold] = []
    writes: list[Write] = []
    fair: list[FairWait] = []
    final: dict[str, Any] | None = None
    grants: list[dict[str, Any]] = []
    names: dict[str, str] = {}  # op -> the name its acquire was for
    ends: list[dict[str, Any]] = []  # acquire outcomes, with the name
    for rec in records:
        ev = rec.get("ev")
        if ev == "op":
            report.ops[f"{rec['what']} {rec['type']}"] += 1
            if "name" in rec:
                names[rec["op"]] = rec["name"]
            elif rec["type"] != "invoke" and rec.get("op") in names and "acquire" in rec["what"]:
                ends.append({**rec, "name": names[rec["op"]]})
        elif ev == "grant":
            grants.append(rec)
        elif ev == "hold":
            hold = Hold.of(rec)
            holds.append(hold)
            report.holds[hold.kind] += 1
        elif ev == "write":
            write = Write.of(rec)
            writes.append(write)
            report.writes["accepted" if write.accepted else "refused"] += 1
        elif ev == "fair":
            fair.append(FairWait.of(rec))
            report.fair.update(fair[-1].tally())
        elif ev == "fault":
            report.faults[rec["type"]] += 1
        elif ev == "expected":
            report.expected[rec["type"]] += int(rec.get("count", 1))
        elif ev == "final":
            final = rec
    report.violations += _overlaps(holds)
    report.violations += _permits(holds)
    report.violations += _fences(holds)
    report.violations += fair_order(fair)
    believed = {(h.name, h.fence): h.end for h in holds if h.fresh and h.mode == "x"}
    late = sum(1 for w in writes if w.accepted and w.done > believed.get((w.name, w.fence), w.done))
    if late:
        report.writes["accepted, finished after the hold's believed end"] = late
    report.violations += _writes(writes, final.get("rows") if final else None, holds)
    report.violations += _leftovers(final)
    report.orphans = _orphans(grants, holds, ends)
    return report
