"""The embedded server's bookkeeping, and the watchdog that stops it when its users are gone.

Standard library only: the watchdog runs this file as a script (``python -I FILE PATH PID``),
a small process that imports neither Django nor this package.

Every ``interval`` seconds the watchdog takes the directory's file lock, prunes the
``users/<pid>`` records of processes that no longer exist, and shuts the server down (it saves
its data) when none is left. That covers the exits that skip ``atexit``: SIGTERM with Python's
default handler, SIGKILL, ``os._exit`` in a forked worker, a crash. It exits when its server is
gone (stopped by the last user out, by ``redislock_server stop``, or replaced by a new one).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path

STOP_TIMEOUT = 10.0
#: Seconds between two looks at the users of a server.
WATCH_INTERVAL = 1.0


def socket_path(path: str) -> str:
    """Return the Unix socket of the server for ``path``."""
    return os.path.join(path, "redis.sock")


def server_pid(path: str) -> int | None:
    """Return the pid of the running server for ``path``, or None."""
    if not alive(socket_path(path)):
        return None
    try:
        return int(Path(path, "server.pid").read_text().strip())
    except (OSError, ValueError):
        return None


def users(path: str) -> list[int]:
    """Return the pids of live processes that joined the server for ``path``."""
    folder = Path(path, "users")
    if not folder.is_dir():
        return []
    live = []
    for entry in folder.iterdir():
        pid = int(entry.name) if entry.name.isdigit() else 0
        if pid and pid_alive(pid):
            live.append(pid)
        else:
            entry.unlink(missing_ok=True)
    return sorted(live)


@contextlib.contextmanager
def locked(path: str) -> Iterator[None]:
    """Hold the directory's ``embedded.lock`` (start, join, leave and the watchdog's look)."""
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "embedded.lock"), "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def alive(sock: str) -> bool:
    """True when a server answers PING on ``sock``."""
    if not os.path.exists(sock):
        return False
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(1.0)
        try:
            conn.connect(sock)
            conn.sendall(b"PING\r\n")
            return conn.recv(64).startswith(b"+PONG")
        except OSError:
            return False


def pid_alive(pid: int) -> bool:
    """True for a running process (a zombie, dead but not yet reaped, counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True  # no /proc (macOS): trust kill()
    return stat.rpartition(")")[2].split()[:1] != ["Z"]


def shutdown(path: str) -> bool:
    """Shut the server for ``path`` down (it saves its data); False if none was running."""
    pid = server_pid(path)
    if pid is None:
        return False
    # A raw SHUTDOWN: redis-py would retry the command when the server closes the socket.
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn, contextlib.suppress(OSError):
        conn.settimeout(STOP_TIMEOUT)
        conn.connect(socket_path(path))
        conn.sendall(b"SHUTDOWN\r\n")
        conn.recv(64)
    deadline = time.monotonic() + STOP_TIMEOUT
    while True:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)  # reap it when this process started it
        if not pid_alive(pid) or time.monotonic() > deadline:
            break
        time.sleep(0.02)
    if pid_alive(pid):
        os.kill(pid, signal.SIGKILL)
    return True


def watch(path: str, server: int, interval: float = WATCH_INTERVAL) -> None:
    """Stop the server ``server`` of ``path`` once no process that joined it is alive."""
    while True:
        time.sleep(interval)
        with locked(path):
            if not pid_alive(server) or server_pid(path) != server:
                return  # stopped, or a new server with its own watchdog
            if not users(path):
                shutdown(path)
                return


if __name__ == "__main__":
    watch(sys.argv[1], int(sys.argv[2]), float(sys.argv[3]) if len(sys.argv) > 3 else 1.0)
