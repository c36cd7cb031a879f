"""What a history worker keeps: its history file, the fenced rows, each hold's believed deadline.

:class:`History` appends the records, :class:`Rows` makes the fenced writes and
:class:`Belief` tracks the latest deadline each open hold has evidence for (see
:mod:`tests.lockhistory.checker`); :mod:`tests.lockhistory.worker` runs the operations.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

now = time.monotonic


class History:
    """Appends records to this worker's file."""

    def __init__(self, path: str, worker: str) -> None:
        self.file = open(path, "a", buffering=1)  # noqa: SIM115 - lives as long as the process
        self.worker = worker
        self.seq = 0

    def add(self, **rec: Any) -> None:
        rec["worker"] = self.worker
        self.file.write(json.dumps(rec, separators=(",", ":")) + "\n")

    def op_id(self) -> str:
        self.seq += 1
        return f"{self.worker}.{self.seq}"

    def step(self, op: str, what: str, type: str, **rec: Any) -> None:
        self.add(ev="op", op=op, what=what, type=type, t=now(), **rec)


class Rows:
    """The fenced row per name: PostgreSQL (``dsn``) or SQLite (``path``)."""

    def __init__(self, db: dict[str, Any]) -> None:
        self.table = db["table"]
        if db["engine"] == "postgresql":
            import psycopg

            self.conn: Any = psycopg.connect(db["dsn"], autocommit=True)
            self.mark = "%s"
        else:
            import sqlite3

            self.conn = sqlite3.connect(db["path"], timeout=30, isolation_level=None)
            self.mark = "?"

    def write(self, name: str, fence: int) -> tuple[float, float, bool]:
        m = self.mark
        invoke = now()
        cur = self.conn.execute(f"SELECT value FROM {self.table} WHERE name = {m}", (name,))
        value = int(cur.fetchone()[0])
        cur = self.conn.execute(
            f"UPDATE {self.table} SET value = {m}, fence = {m} WHERE name = {m} AND fence < {m}",
            (value + 1, fence, name, fence),
        )
        return invoke, now(), cur.rowcount == 1


class Belief:
    """The deadline each open hold has evidence for, fed by the watchdog wrapper and the worker.

    Kept in the hold's own record (``rec["until"]``); the hold objects are referenced while
    their record is open, so an ``id()`` is never confused with a later hold's.
    """

    def __init__(self, redlock: bool) -> None:
        self.redlock = redlock
        self.open: dict[int, tuple[Any, dict[str, Any]]] = {}
        self.lost: dict[tuple[str, int], float] = {}
        self.guard = threading.Lock()

    def watch(self) -> None:
        from django_redislock import signals
        from django_redislock.locking.watchdog import watchdog

        renew, renewed = watchdog._renew, watchdog._renewed
        sent: dict[int, float] = {}

        def _renew(due: list[tuple[Any, Any]]) -> None:
            t = now()
            for _, hold in due:
                sent[id(hold)] = t
            renew(due)

        def _renewed(lock: Any, hold: Any, result: Any) -> None:
            renewed(lock, hold, result)
            ok = not isinstance(result, Exception) and int(result) > 0
            if ok and lock._hold is hold and id(hold) in sent:
                self.renewed(lock, hold, sent.pop(id(hold)))

        watchdog._renew, watchdog._renewed = _renew, _renewed  # type: ignore[method-assign]

        def lost(sender: Any, name: str, fence: int, **kw: Any) -> None:
            self.lost.setdefault((name, int(fence)), now())

        signals.lock_lost.connect(lost, weak=False)

    def track(self, lock: Any, hold: Any, rec: dict[str, Any], invoke: float) -> None:
        rec["until"], rec["set_at"] = invoke + float(lock.ttl), invoke
        if self.redlock:
            rec["until"] = float(lock._valid_until)
        with self.guard:
            self.open[id(hold)] = (hold, rec)

    def renewed(self, lock: Any, hold: Any, sent: float) -> None:
        """A renewal sent at ``sent`` succeeded: the TTL runs from then at least."""
        with self.guard:
            hold_rec = self.open.get(id(hold))
            if hold_rec is None or hold_rec[0] is not hold:
                return
            rec = hold_rec[1]
            if self.redlock:
                rec["until"] = max(rec["until"], float(lock._valid_until))
            elif sent > rec["set_at"]:  # not overtaken by a later extend of this object
                rec["until"] = max(rec["until"], sent + float(lock.ttl))

    def extended(
        self, lock: Any, hold: Any, rec: dict[str, Any], invoke: float, ttl: float
    ) -> None:
        """``extend(ttl)`` sent at ``invoke`` succeeded: it *sets* the TTL (it may shorten)."""
        with self.guard:
            if self.redlock:
                rec["until"] = max(rec["until"], float(lock._valid_until))
            else:
                rec["until"], rec["set_at"] = invoke + ttl, invoke

    def close(self, rec: dict[str, Any]) -> None:
        with self.guard:
            for key, (_, tracked) in list(self.open.items()):
                if tracked is rec:
                    del self.open[key]
            rec.pop("set_at", None)
