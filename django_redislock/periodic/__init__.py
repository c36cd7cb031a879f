"""Periodic tasks: ``@periodic_task(cron=...)`` / ``(every=...)``, the settings form, the scheduler.

See ``docs/workers.md`` ("Periodic tasks") for the guarantees: each tick is queued exactly
once however many schedulers run, and what each failure does.
"""

from __future__ import annotations

from .registry import PERIODIC_SETTING, periodic_task
from .scheduler import Scheduler
from .schedules import Schedule

__all__ = ["PERIODIC_SETTING", "Schedule", "Scheduler", "periodic_task"]
