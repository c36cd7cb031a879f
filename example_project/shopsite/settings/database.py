"""``DATABASE_URL`` parsing (a few lines instead of a dependency)."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import django

ENGINES = {
    "postgres": "django.db.backends.postgresql",
    "postgresql": "django.db.backends.postgresql",
    "pgsql": "django.db.backends.postgresql",
    "sqlite": "django.db.backends.sqlite3",
}


def sqlite(path: Path | str) -> dict[str, Any]:
    """SQLite set up for a worker that writes from several threads while the site reads.

    The busy timeout alone is not enough: a transaction that starts as a read (the
    order task's ``get_or_create`` selects first) and then writes is refused at once
    with "database is locked" when another connection writes meanwhile, whatever the
    timeout, because SQLite cannot let it wait without risking a deadlock. So on
    Django >= 5.1 transactions start ``IMMEDIATE`` (they take the write lock first
    and wait for it up to the timeout) and the journal is WAL (readers never block
    the writer). Older Django keeps the timeout only; use PostgreSQL
    (``DATABASE_URL``) for a threaded worker there.
    """
    options: dict[str, Any] = {"timeout": 20}
    if django.VERSION >= (5, 1) and str(path) != ":memory:":
        options["transaction_mode"] = "IMMEDIATE"
        options["init_command"] = "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"
    return {"ENGINE": ENGINES["sqlite"], "NAME": str(path), "OPTIONS": options}


def parse(url: str) -> dict[str, Any]:
    """``postgres://user:password@host:port/name`` or ``sqlite:///absolute/path``."""
    parts = urlsplit(url)
    if parts.scheme not in ENGINES:
        raise ValueError(f"DATABASE_URL scheme must be one of {', '.join(ENGINES)}: {url!r}")
    if ENGINES[parts.scheme].endswith("sqlite3"):
        return sqlite(unquote(parts.path) or ":memory:")
    return {
        "ENGINE": ENGINES[parts.scheme],
        "NAME": unquote(parts.path.lstrip("/")),
        "USER": unquote(parts.username or ""),
        "PASSWORD": unquote(parts.password or ""),
        "HOST": parts.hostname or "",
        "PORT": str(parts.port or ""),
        "CONN_MAX_AGE": 60,
    }
