"""What the tests that run workers as real processes share.

Spawning ``drain_queue`` against a test server, waiting for a condition with a bound,
collecting a process's output with a bound, and a Redis server of a test's own that
persists every write (AOF), for the tests that restart or kill it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from django.test import override_settings

from .conftest import RedisTarget
from .servers import RedisProcess

#: The repository's root: the spawned processes import ``tests`` and ``django_redislock`` from it.
ROOT = Path(__file__).resolve().parent.parent


def spawn(
    target: RedisTarget,
    *args: str,
    task_modules: list[str] | None = None,
    options: dict[str, Any] | None = None,
) -> subprocess.Popen[str]:
    """``manage.py drain_queue *args`` on ``target``'s server (its first node for a cluster)."""
    location = target.location if isinstance(target.location, str) else target.location[0]
    env = {
        **os.environ,
        "REDISLOCK_TEST_TASK_MODULES": json.dumps(task_modules or []),
        "DJANGO_SETTINGS_MODULE": "tests.queue_worker_settings",
        "REDISLOCK_TEST_URL": location,
        "REDISLOCK_TEST_OPTIONS": json.dumps({**target.options, **(options or {})}),
        "PYTHONPATH": str(ROOT),
        "PYTHONUNBUFFERED": "1",
    }
    return subprocess.Popen(
        [sys.executable, "-m", "django", "drain_queue", *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for(condition: Callable[[], Any], seconds: float, what: str) -> float:
    """Poll ``condition`` (test side only) until true; returns the seconds it took."""
    start = time.monotonic()
    while not condition():
        if time.monotonic() - start > seconds:
            raise AssertionError(f"timed out after {seconds}s waiting for {what}")
        time.sleep(0.02)
    return time.monotonic() - start


def finish(process: subprocess.Popen[str], timeout: float = 30) -> tuple[int, str, str]:
    """Wait for ``process`` to exit: its return code, stdout, stderr (killed after ``timeout``)."""
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        out, err = process.communicate()
        raise AssertionError(f"the process did not exit: {out}\n{err}") from None
    return process.returncode, out, err


@contextmanager
def aof_server(tmp_path: Path) -> Iterator[RedisProcess]:
    """A server of the test's own that writes every command to its AOF before answering."""
    extra = ["--appendonly", "yes", "--appendfsync", "always"]
    server = RedisProcess(tmp_path / "aof", extra=extra).start()
    try:
        yield server
    finally:
        server.stop()


#: Client options for a worker that must ride out its server's restart: replies may take
#: longer than usual while the server loads its AOF, and a refused connection fails fast.
OUTAGE_OPTIONS = {"SOCKET_TIMEOUT": 6.0, "SOCKET_CONNECT_TIMEOUT": 0.5}


@contextmanager
def own_queue_server(tmp_path: Path) -> Iterator[RedisProcess]:
    """:func:`aof_server` as the ``default`` queue alias (with :data:`OUTAGE_OPTIONS`)."""
    with aof_server(tmp_path) as server:
        params = {"LOCATION": server.url, "KEY_PREFIX": "test", "OPTIONS": OUTAGE_OPTIONS}
        with override_settings(REDISLOCK_QUEUES={"default": params}):
            yield server
