"""Run the shop under gunicorn on 127.0.0.1 for the demo and the benchmark (bounded waits)."""

from __future__ import annotations

import contextlib
import http.client
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

PROJECT_DIR = Path(__file__).resolve().parent.parent


def free_port() -> int:
    """A free loopback port (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def gunicorn_command(port: int, workers: int) -> list[str]:
    """gunicorn with ``workers`` sync processes, quiet, bound to loopback only."""
    return [
        sys.executable,
        "-m",
        "gunicorn",
        "--workers",
        str(workers),
        "--bind",
        f"127.0.0.1:{port}",
        "--chdir",
        str(PROJECT_DIR),
        "--log-level",
        "warning",
        "--graceful-timeout",
        "5",
        "shopsite.wsgi",
    ]


def wait_ready(port: int, path: str, process: subprocess.Popen[bytes], seconds: float) -> None:
    """Poll ``path`` until it answers (bounded by ``seconds``)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the web server exited with code {process.returncode}")
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
        try:
            conn.request("GET", path)
            if conn.getresponse().status < 500:
                return
        except OSError:
            pass
        finally:
            conn.close()
        time.sleep(0.1)
    raise RuntimeError(f"the web server did not answer {path} within {seconds:.0f}s")


def stop(process: subprocess.Popen[bytes], seconds: float = 10.0) -> None:
    """SIGTERM, then SIGKILL after ``seconds``."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(seconds)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)


@contextlib.contextmanager
def running(
    workers: int, env: dict[str, str], ready_path: str = "/", seconds: float = 60.0
) -> Iterator[int]:
    """Start gunicorn with ``workers`` workers, wait until ready, yield its port, stop it."""
    try:
        import gunicorn  # noqa: F401
    except ImportError:
        raise RuntimeError(
            "gunicorn is not installed: pip install 'django-redislock[demo]'"
        ) from None
    port = free_port()
    process = subprocess.Popen(gunicorn_command(port, workers), env={**os.environ, **env})
    try:
        wait_ready(port, ready_path, process, seconds)
        yield port
    finally:
        stop(process)
