"""``DATABASE_URL`` parsing (a few lines instead of a dependency)."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

ENGINES = {
    "postgres": "django.db.backends.postgresql",
    "postgresql": "django.db.backends.postgresql",
    "pgsql": "django.db.backends.postgresql",
    "sqlite": "django.db.backends.sqlite3",
}


def sqlite(path: Path | str) -> dict[str, Any]:
    """SQLite with a generous lock timeout (the demo's worker writes while the site reads)."""
    return {"ENGINE": ENGINES["sqlite"], "NAME": str(path), "OPTIONS": {"timeout": 20}}


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
