"""Django's database connections between two tasks, at no cost to a worker that has none.

Django closes a connection that is unusable or past ``CONN_MAX_AGE`` around each request;
a worker does the same around each task (:func:`close_old_connections`). Django's own
function looks up every alias's thread-local connection, a few microseconds per task: most
of a no-op task's cost. A connection only exists after it was opened, and opening one sends
``connection_created``, so until this process has received that signal there is nothing to
close and the check is skipped. A connection opened before this module was imported sent
its signal to nobody: :func:`note_open_connections`, called when a worker starts, counts the
ones of its thread. Once any connection was opened, every task pays for the check as before
(connections are per thread, so one flag for the process is the simple, safe answer).
"""

from __future__ import annotations

from typing import Any

from django.db import close_old_connections as django_close_old_connections
from django.db import connections
from django.db.backends.signals import connection_created

#: True once this process opened a database connection (a forked child inherits it).
opened = False


def _opened(sender: Any, **kwargs: Any) -> None:
    global opened
    opened = True


connection_created.connect(_opened, dispatch_uid="django_redislock.queue.database")


def close_old_connections() -> None:
    """Django's ``close_old_connections()``, skipped while no connection was ever opened."""
    if opened:
        django_close_old_connections()


def note_open_connections() -> None:
    """Count the connections this thread opened before the signal's receiver was connected."""
    global opened
    if not opened:
        opened = any(conn.connection is not None for conn in connections.all(initialized_only=True))
