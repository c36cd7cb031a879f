"""The queue page's table of task functions: runs, failure rate and runtime percentiles.

Read in the queue page's one pipeline (:func:`~.data.task_page`) from the buckets
the worker keeps (:mod:`django_redislock.queue.fnstats`): each function's runs,
failed runs and runtime p50/p95 over the last hour and the last day. A function
name is text from a payload (anyone who can queue a task chooses it): it is
escaped by the template and linked to the recent runs filtered by it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..queue.fnstats import FunctionStats, Window
from .runs import runs_url


def runtime_text(seconds: float | None) -> str:
    """``850 µs``, ``12.3 ms``, ``1.24 s``, ``95 s``; ``-`` when unknown."""
    if seconds is None:
        return "-"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.0f} µs"
    if seconds < 1:
        return f"{seconds * 1e3:.3g} ms"
    if seconds < 60:
        return f"{seconds:.3g} s"
    return f"{seconds / 60:.3g} min"


def rate_text(window: Window) -> str:
    rate = window.failure_rate
    return "-" if rate is None else f"{100 * rate:.1f} %"


@dataclass
class FunctionRow:
    name: str
    stats: FunctionStats
    runs_link: str

    def cells(self, window: Window) -> list[str]:
        return [
            f"{window.runs:,}",
            f"{window.failed:,}",
            rate_text(window),
            runtime_text(window.p50),
            runtime_text(window.p95),
        ]

    @property
    def hour(self) -> list[str]:
        return self.cells(self.stats.hour)

    @property
    def day(self) -> list[str]:
        return self.cells(self.stats.day)

    @property
    def failing(self) -> bool:
        return bool(self.stats.hour.failed)


def function_context(functions: Any, queue: Any) -> dict[str, Any]:
    """The queue page's function table (or why it is missing)."""
    if functions is None:
        return {"functions": [], "functions_error": ""}
    if isinstance(functions, Exception):
        return {"functions": [], "functions_error": str(functions)}
    alias, name = queue.backend.alias, queue.name
    rows = [
        FunctionRow(
            s.name,
            s,
            runs_url(alias, name, function=s.name) if s.name not in ("(other)", "?") else "",
        )
        for s in functions
    ]
    return {"functions": rows, "functions_error": ""}
