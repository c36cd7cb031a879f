"""The database row per lock name of a history run: one fenced row each (PostgreSQL or SQLite).

Each exclusive hold of a worker makes one fenced read-modify-write of its name's row
(:class:`tests.lockhistory.worker.Rows`); the coordinator creates the table here and reads
the values at the end, which the checker compares with the writes accepted.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any

POSTGRES_DSN = os.environ.get(
    "REDISLOCK_TEST_POSTGRES", "host=127.0.0.1 port=5432 dbname=test user=postgres"
)


def open_db(directory: Path, names: tuple[str, ...]) -> dict[str, Any]:
    """PostgreSQL when reachable (a table of this run's own), else a SQLite file."""
    table = f"lockhist_{uuid.uuid4().hex[:10]}"
    try:
        import psycopg

        with psycopg.connect(POSTGRES_DSN, autocommit=True, connect_timeout=3) as pg:
            pg.execute(f"CREATE TABLE {table} (name text PRIMARY KEY, value int, fence bigint)")
            for name in names:
                pg.execute(f"INSERT INTO {table} VALUES (%s, 0, 0)", (name,))
        return {"engine": "postgresql", "dsn": POSTGRES_DSN, "table": table}
    except Exception:  # no driver, no server: SQLite does the same job
        import sqlite3

        path = str(directory / "rows.sqlite3")
        conn = sqlite3.connect(path, isolation_level=None)
        conn.execute(f"CREATE TABLE {table} (name text PRIMARY KEY, value int, fence bigint)")
        for name in names:
            conn.execute(f"INSERT INTO {table} VALUES (?, 0, 0)", (name,))
        conn.close()
        return {"engine": "sqlite", "path": path, "table": table}


def read_rows(db: dict[str, Any], drop: bool = True) -> dict[str, int]:
    query = f"SELECT name, value FROM {db['table']}"
    if db["engine"] == "postgresql":
        import psycopg

        with psycopg.connect(db["dsn"], autocommit=True) as pg:
            rows = {name: int(value) for name, value in pg.execute(query).fetchall()}
            if drop:
                pg.execute(f"DROP TABLE {db['table']}")
        return rows
    import sqlite3

    conn = sqlite3.connect(db["path"])
    rows = {name: int(value) for name, value in conn.execute(query).fetchall()}
    conn.close()
    return rows
