"""``python -m bench.plot``: turn the latest ``bench/results/*.json`` into plots and tables.

For every result it writes ``docs/_static/bench/<name>.png`` (one bar chart per metric,
stating the machine, versions and date of the run) and ``docs/bench/<name>.md`` (the same
numbers as a table, plus the run's notes), which ``docs/benchmarks.md`` includes.

A result may name the columns to plot in ``"plots"`` (a list of column names); otherwise
every numeric column is plotted. The first column labels the bars.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import RESULTS, table

DOCS = Path(__file__).resolve().parent.parent / "docs"
IMAGES = DOCS / "_static" / "bench"
TABLES = DOCS / "bench"


def numeric_columns(result: dict[str, Any]) -> list[str]:
    """Columns to plot: the result's ``plots`` or every column holding numbers."""
    if result.get("plots"):
        return list(result["plots"])
    columns = result["columns"][1:]
    return [c for c in columns if _plottable([r.get(c) for r in result["rows"]])]


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _plottable(values: list[Any]) -> bool:
    """Numbers, where rows that did not measure it (missing, empty, "n/a") are allowed."""
    present = [v for v in values if v not in (None, "", "n/a")]
    return bool(present) and all(_number(v) for v in present)


def caption(machine: dict[str, Any]) -> str:
    """One line naming the machine, the versions and the date of a run."""
    packages = ", ".join(f"{k} {v}" for k, v in sorted(machine.get("packages", {}).items()))
    return (
        f"{machine.get('date', '?')} | Python {machine.get('python', '?')} | "
        f"{machine.get('cpus', '?')} CPUs | {machine.get('platform', '?')}\n{packages}"
    )


def plot(result: dict[str, Any]) -> Path | None:
    """Draw one horizontal bar chart per metric of ``result``; return the PNG path."""
    columns = numeric_columns(result)
    if not columns:
        return None
    label = result["columns"][0]
    rows = result["rows"]
    names = [str(row.get(label, "")) for row in rows]
    fig, axes = plt.subplots(
        len(columns), 1, figsize=(8, 1.1 + 0.32 * len(rows) * len(columns)), squeeze=False
    )
    for ax, column in zip(axes[:, 0], columns, strict=False):
        measured = [row.get(column) if _number(row.get(column)) else None for row in rows]
        values = [float(v) if v is not None else 0.0 for v in measured]
        bars = ax.barh(names, values, color="#417690")
        labels = [_short(v) if v is not None else "n/a" for v in measured]
        ax.bar_label(bars, labels=labels, padding=3, fontsize=8)
        ax.set_title(column, fontsize=10, loc="left")
        ax.invert_yaxis()
        ax.tick_params(labelsize=8)
        ax.margins(x=0.15)
    fig.suptitle(f"bench: {result['name']}", fontsize=12, x=0.01, ha="left")
    fig.text(0.01, 0.005, caption(result.get("machine", {})), fontsize=6, va="bottom")
    fig.tight_layout(rect=(0, 0.04, 1, 0.98))
    IMAGES.mkdir(parents=True, exist_ok=True)
    path = IMAGES / f"{result['name']}.png"
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def _short(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def markdown(result: dict[str, Any], image: Path | None) -> str:
    """The table, notes and plot of one result as a MyST fragment."""
    machine = result.get("machine", {})
    lines = [table(result["rows"], result["columns"]), ""]
    lines += [f"- {note}" for note in result.get("notes", [])]
    lines += ["", f"Run: {caption(machine).replace(chr(10), '; ')}.", ""]
    if image is not None:
        lines += [f"![{result['name']} benchmark](../_static/bench/{image.name})", ""]
    return "\n".join(lines)


def main() -> int:
    TABLES.mkdir(parents=True, exist_ok=True)
    found = sorted(RESULTS.glob("*.json"))
    for path in found:
        result = json.loads(path.read_text())
        image = plot(result)
        (TABLES / f"{result['name']}.md").write_text(markdown(result, image))
        print(f"{path.name}: {image or 'no numeric columns'}")
    if not found:
        print(f"no results in {RESULTS}; run python3 dev.py bench first")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
