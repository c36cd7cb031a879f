"""The example shop's SQLite settings: a threaded order worker never meets "database is locked".

Issue 28: the shop on its default SQLite failed 23.5 % of ``create_order`` runs
under a 4-thread worker. The busy timeout does not help a transaction that
reads first and then writes (``get_or_create`` in ``atomic``): SQLite refuses
its upgrade at once when another connection writes. Transactions now start
``IMMEDIATE`` (Django >= 5.1), which waits for the write lock, with a WAL journal.
(Measured with 4 threads x 200 such transactions: deferred 16-33 % failed,
immediate 0 %; WAL with deferred transactions is worse, 59-77 %, so it is only
turned on together with immediate ones.)
"""

from __future__ import annotations

import django
import pytest
from shopsite.settings.database import parse, sqlite


@pytest.mark.skipif(django.VERSION < (5, 1), reason="transaction_mode needs Django 5.1")
def test_sqlite_transactions_take_the_write_lock_first(tmp_path: object) -> None:
    options = sqlite(f"{tmp_path}/db.sqlite3")["OPTIONS"]
    assert options["transaction_mode"] == "IMMEDIATE" and options["timeout"] >= 20
    assert "journal_mode=WAL" in options["init_command"]
    assert parse(f"sqlite:///{tmp_path}/x.sqlite3")["OPTIONS"] == options


def test_old_django_and_memory_keep_the_timeout_only(monkeypatch: pytest.MonkeyPatch) -> None:
    assert sqlite(":memory:")["OPTIONS"] == {"timeout": 20}
    monkeypatch.setattr(django, "VERSION", (4, 2, 0, "final", 0))
    assert sqlite("/tmp/db.sqlite3")["OPTIONS"] == {"timeout": 20}


def test_postgres_is_used_when_database_url_names_it() -> None:
    config = parse("postgres://shop:secret@db.example:5433/shop")
    assert config["ENGINE"] == "django.db.backends.postgresql"
    assert (config["NAME"], config["HOST"], config["PORT"]) == ("shop", "db.example", "5433")
