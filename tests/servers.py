"""Real ``redis-server`` processes for the tests, on free loopback ports.

Uses the system ``redis-server`` when it is on ``PATH`` and the embedded
extra's ``valkey-server`` otherwise. Every process lives in its own temporary
directory and is stopped by its fixture; an ``atexit`` hook kills any that a
crashed session left behind.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import random
import shutil
import socket
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import redis

from django_redislock.embedded import find_binary

START_TIMEOUT = 15.0
_running: set[subprocess.Popen[bytes]] = set()


def server_binary() -> str:
    """The system redis-server if present, else the pip-installed one."""
    return shutil.which("redis-server") or find_binary()


def port_is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def ephemeral_floor() -> int:
    """The lowest port the kernel gives outgoing connections (32768 when unknown)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port(cluster: bool = False) -> int:
    """A free loopback port (and its cluster bus port, +10000, when ``cluster``).

    Ports come from below the kernel's ephemeral range. A port inside it can be
    picked as the local port of an outgoing connection: a client then probing
    the port before the server listens, or a test aiming at a closed port,
    connects to itself (TCP simultaneous open) and reads its own command back
    as the reply, and the server can no longer bind the port.
    """
    high = ephemeral_floor() - 1 - (10000 if cluster else 0)
    for _ in range(200):
        port = random.randint(10000, max(10001, high))
        if port in (6379, 16379) or not port_is_free(port):
            continue
        if cluster and not port_is_free(port + 10000):
            continue
        return port
    raise RuntimeError("no free port found")


_closed: list[socket.socket] = []


def closed_port() -> int:
    """A loopback port that refuses connections for the rest of the test session.

    Its socket stays bound but never listens, so no test server can start on
    it, and it lies below the ephemeral range, so a connection to it cannot be
    a self-connect (see :func:`free_port`).
    """
    for _ in range(200):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.bind(("127.0.0.1", free_port()))
        except OSError:
            sock.close()
            continue
        _closed.append(sock)
        return int(sock.getsockname()[1])
    raise RuntimeError("no closed port found")


class RedisProcess:
    """One redis-server on 127.0.0.1 in its own directory."""

    def __init__(
        self,
        directory: Path,
        *,
        cluster: bool = False,
        extra: Sequence[str] = (),
        binary: str | None = None,
    ) -> None:
        self.directory = directory
        self.cluster = cluster
        self.extra = list(extra)
        self.binary = binary  # None: server_binary()
        self.port = free_port(cluster)
        self.process: subprocess.Popen[bytes] | None = None
        self.config_file: Path | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def socket_path(self) -> Path:
        """The server's Unix socket (every test server listens on one too)."""
        return self.directory / "redis.sock"

    def client(self, socket_timeout: float = 5.0) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=socket_timeout)

    def start(self) -> RedisProcess:
        self.directory.mkdir(parents=True, exist_ok=True)
        if self.config_file is not None:  # a sentinel: everything is in its config file
            return self._launch([server_binary(), str(self.config_file), "--sentinel"])
        args = [
            self.binary or server_binary(),
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--dir",
            str(self.directory),
            "--save",
            "",
            "--appendonly",
            "no",
            "--logfile",
            "server.log",
            "--daemonize",
            "no",
            "--unixsocket",
            str(self.socket_path),
            *self.extra,
        ]
        if self.cluster:
            args += [
                "--cluster-enabled",
                "yes",
                "--cluster-config-file",
                "nodes.conf",
                "--cluster-node-timeout",
                "5000",
            ]
        return self._launch(args)

    def _launch(self, args: list[str]) -> RedisProcess:
        self.process = subprocess.Popen(
            args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL
        )
        _running.add(self.process)
        self._wait_ready()
        return self

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                log_file = self.directory / "server.log"
                log = log_file.read_text()[-800:] if log_file.exists() else ""
                raise RuntimeError(f"redis-server on {self.port} exited: {log}")
            with contextlib.suppress(redis.RedisError):
                if self.client(socket_timeout=0.5).ping():
                    return
            time.sleep(0.02)
        raise RuntimeError(f"redis-server on {self.port} did not start")

    def stop(self) -> None:
        """Stop the server at once (SIGKILL semantics are tested elsewhere: this is cleanup)."""
        if self.process is None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)
        _running.discard(self.process)
        self.process = None

    def kill(self) -> None:
        """SIGKILL the server, for fault tests."""
        if self.process is not None:
            self.process.kill()
            self.process.wait(timeout=10)
            _running.discard(self.process)
            self.process = None

    @property
    def run_id(self) -> str:
        return str(self.client().info("server")["run_id"])


def start_cluster(
    directory: Path, masters: int = 3, extra: Sequence[str] = ()
) -> list[RedisProcess]:
    """Start ``masters`` cluster nodes, split the 16384 slots between them and join them.

    ``extra`` are more server arguments for every node (``--appendonly yes``, ...).
    """
    nodes = [
        RedisProcess(directory / f"node{i}", cluster=True, extra=extra).start()
        for i in range(masters)
    ]
    try:
        step = 16384 // masters
        for i, node in enumerate(nodes):
            last = 16383 if i == masters - 1 else (i + 1) * step - 1
            node.client().execute_command("CLUSTER", "ADDSLOTS", *range(i * step, last + 1))
        for node in nodes[1:]:
            nodes[0].client().execute_command("CLUSTER", "MEET", "127.0.0.1", node.port)
        wait_cluster_ok(nodes)
    except BaseException:
        for node in nodes:
            node.stop()
        raise
    return nodes


def start_sentinel(
    directory: Path, master: RedisProcess, service: str = "mymaster"
) -> RedisProcess:
    """Start one sentinel monitoring ``master`` as ``service`` (quorum 1)."""
    directory.mkdir(parents=True, exist_ok=True)
    config = directory / "sentinel.conf"
    sentinel = RedisProcess(directory)
    config.write_text(
        f"port {sentinel.port}\nbind 127.0.0.1\ndir {directory}\nlogfile server.log\n"
        f"sentinel monitor {service} 127.0.0.1 {master.port} 1\n"
        f"sentinel down-after-milliseconds {service} 1000\n"
        f"sentinel failover-timeout {service} 5000\n"
    )
    sentinel.config_file = config
    return sentinel.start()


def wait_cluster_ok(nodes: list[RedisProcess]) -> None:
    """Wait until every node says ``cluster_state:ok`` and knows all the others."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        infos = [node.client().cluster("info") for node in nodes]
        if all(
            info["cluster_state"] == "ok" and int(info["cluster_known_nodes"]) == len(nodes)
            for info in infos
        ):
            return
        time.sleep(0.05)
    raise RuntimeError("the test cluster did not reach cluster_state:ok")


@atexit.register
def _kill_leftovers() -> None:
    for process in list(_running):
        with contextlib.suppress(OSError):
            process.kill()
        with contextlib.suppress(Exception):
            process.wait(timeout=5)
    if os.environ.get("REDISLOCK_TEST_DEBUG"):
        print(f"killed {len(_running)} leftover redis-server processes")


def start_replica(directory: Path, master: RedisProcess, extra: Sequence[str] = ()) -> RedisProcess:
    """Start a replica of ``master`` and wait until its link is up and in sync."""
    master.client().config_set("repl-diskless-sync-delay", 0)  # sync now, not in 5 s
    replica = RedisProcess(
        directory, extra=["--replicaof", "127.0.0.1", str(master.port), *extra]
    ).start()
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        info = replica.client().info("replication")
        if info.get("master_link_status") == "up" and not info.get("master_sync_in_progress"):
            return replica
        time.sleep(0.05)
    replica.stop()
    raise RuntimeError(f"replica on {replica.port} did not sync with {master.port}")


def start_sentinels(
    directory: Path,
    master: RedisProcess,
    *,
    service: str = "mymaster",
    count: int = 3,
    quorum: int = 2,
    down_after_ms: int = 1000,
) -> list[RedisProcess]:
    """Start ``count`` sentinels monitoring ``master`` as ``service`` with ``quorum``.

    The sentinels find each other (and the replicas) through the master, so wait
    until each one knows the others before a test relies on a failover.
    """
    sentinels = []
    for i in range(count):
        where = directory / f"sentinel{i}"
        where.mkdir(parents=True, exist_ok=True)
        sentinel = RedisProcess(where)
        config = where / "sentinel.conf"
        config.write_text(
            f"port {sentinel.port}\nbind 127.0.0.1\ndir {where}\nlogfile server.log\n"
            f"sentinel monitor {service} 127.0.0.1 {master.port} {quorum}\n"
            f"sentinel down-after-milliseconds {service} {down_after_ms}\n"
            f"sentinel failover-timeout {service} 5000\n"
            f"sentinel parallel-syncs {service} 1\n"
        )
        sentinel.config_file = config
        sentinels.append(sentinel.start())
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        known = [_other_sentinels(s, service) for s in sentinels]
        if all(n >= count - 1 for n in known):
            return sentinels
        time.sleep(0.1)
    for sentinel in sentinels:
        sentinel.stop()
    raise RuntimeError("the sentinels did not discover each other")


def _other_sentinels(sentinel: RedisProcess, service: str) -> int:
    reply = sentinel.client().execute_command("SENTINEL", "MASTER", service)
    fields = dict(zip(reply[::2], reply[1::2], strict=True)) if isinstance(reply, list) else reply
    value: Any = fields.get(b"num-other-sentinels", fields.get("num-other-sentinels", 0))
    return int(value)
