"""``embedded://PATH``: one private server per directory, shared by separate processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.core.management import call_command

from django_redislock import embedded, embedded_watchdog

SCRIPT = textwrap.dedent(
    """
    import signal
    import sys
    from django_redislock.backends.redis import RedisLockBackend

    # A shell without job control starts background jobs with SIGINT ignored, and Python
    # keeps an inherited SIG_IGN: behave like a program run from a terminal whatever the
    # test runner was started from.
    signal.signal(signal.SIGINT, signal.default_int_handler)

    path, role = sys.argv[1], sys.argv[2]
    client = RedisLockBackend("e", {"LOCATION": "embedded://" + path}).client
    if role == "writer":
        client.set("shared", "from-writer")
        print("ready", flush=True)
        sys.stdin.readline()          # stay joined until the test says so
    else:
        print((client.get("shared") or b"<none>").decode(), flush=True)
    """
)


def spawn(path: Path, role: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", SCRIPT, str(path), role],
        text=True,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )


@pytest.fixture
def path(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    folder = tmp_path_factory.mktemp("emb")
    yield folder
    embedded.stop_server(str(folder))  # never leave a server behind, whatever the test did


def pid_alive(pid: int) -> bool:
    """True for a running process; a zombie (stopped, not yet reaped by its parent) is gone."""
    return embedded_watchdog.pid_alive(pid)


def test_two_processes_share_one_server_and_the_last_one_out_stops_it(path: Path) -> None:
    writer = spawn(path, "writer")
    assert writer.stdout is not None and writer.stdin is not None
    assert writer.stdout.readline().strip() == "ready"
    server = embedded.server_pid(str(path))
    assert server is not None

    reader = spawn(path, "reader")
    out, _ = reader.communicate(timeout=30)
    assert out.strip() == "from-writer"
    assert embedded.server_pid(str(path)) == server  # the reader joined, it started nothing
    assert embedded.users(str(path)) == [writer.pid]  # ... and left at exit

    writer.stdin.write("\n")
    writer.stdin.flush()
    writer.wait(timeout=30)
    assert embedded.server_pid(str(path)) is None
    assert not pid_alive(server)
    assert (path / "data").is_dir()


def test_data_survives_a_restart(path: Path) -> None:
    writer = spawn(path, "writer")
    assert writer.stdout is not None and writer.stdin is not None
    writer.stdout.readline()
    writer.communicate("\n", timeout=30)
    assert embedded.server_pid(str(path)) is None
    reader = spawn(path, "reader")
    out, _ = reader.communicate(timeout=30)
    assert out.strip() == "from-writer"


def wait_until_stopped(path: Path, server: int, seconds: float = 15.0) -> None:
    deadline = time.monotonic() + seconds
    while (embedded.server_pid(str(path)) is not None or pid_alive(server)) and (
        time.monotonic() < deadline
    ):
        time.sleep(0.1)
    assert embedded.server_pid(str(path)) is None
    assert not pid_alive(server)


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGINT, signal.SIGKILL], ids=str)
def test_the_server_stops_when_its_last_user_is_signalled(path: Path, how: int) -> None:
    # SIGTERM with Python's default handler and SIGKILL skip atexit: the watchdog stops the server.
    writer = spawn(path, "writer")
    assert writer.stdout is not None
    assert writer.stdout.readline().strip() == "ready"
    server = embedded.server_pid(str(path))
    assert server is not None
    writer.send_signal(how)
    writer.wait(timeout=10)
    wait_until_stopped(path, server)
    assert embedded.users(str(path)) == []


def test_the_watchdog_leaves_a_used_server_alone_and_the_command_stops_it(
    path: Path, capsys
) -> None:
    writer = spawn(path, "writer")
    assert writer.stdout is not None and writer.stdin is not None
    writer.stdout.readline()
    server = embedded.server_pid(str(path))
    time.sleep(embedded.WATCH_INTERVAL * 2.5)  # the watchdog had two looks at its users

    call_command("redislock_server", "status", "--path", str(path))
    assert f"running, pid {server}, users [{writer.pid}]" in capsys.readouterr().out
    call_command("redislock_server", "stop", "--path", str(path))
    assert f"stopped {path}" in capsys.readouterr().out
    assert server is not None and not pid_alive(server)
    call_command("redislock_server", "status", "--path", str(path))
    assert "stopped" in capsys.readouterr().out
    writer.communicate("\n", timeout=30)


def test_a_killed_user_is_pruned(path: Path) -> None:
    writer = spawn(path, "writer")
    assert writer.stdout is not None
    writer.stdout.readline()
    (path / "users" / "999999999").touch()  # a record left by a process that is gone
    assert embedded.users(str(path)) == [writer.pid]
    assert sorted(p.name for p in (path / "users").iterdir()) == [str(writer.pid)]
    writer.kill()
    writer.wait(timeout=10)


def test_in_process_use_through_the_handler(path: Path, settings) -> None:
    settings.REDISLOCK_LOCKS = {"default": {"LOCATION": f"embedded://{path}"}}
    from django_redislock import locks

    backend = locks["default"]
    assert backend.ping()
    assert os.getpid() in embedded.users(str(path))


def test_too_long_a_path_is_refused(tmp_path: Path) -> None:
    from django_redislock.exceptions import ConfigurationError

    with pytest.raises(ConfigurationError, match="too long for a Unix socket"):
        embedded.ensure_server(str(tmp_path / ("x" * 120)))
