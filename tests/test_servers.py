"""Smoke tests of the server fixtures: each topology is real and answers."""

from __future__ import annotations

import socket

import pytest
import redis

from .servers import RedisProcess, closed_port, ephemeral_floor, free_port


def test_single_server_answers_ping(redis_server: RedisProcess) -> None:
    assert redis_server.port != 6379
    assert redis_server.client().ping() is True


def test_cluster_has_three_masters_covering_every_slot(redis_cluster: list[RedisProcess]) -> None:
    client = redis.RedisCluster(host="127.0.0.1", port=redis_cluster[0].port)
    masters = client.get_primaries()
    assert len(masters) == 3
    slots = client.cluster_slots()
    covered = sum(end - start + 1 for (start, end) in slots)
    assert covered == 16384
    # Keys with different hash tags land on different masters: the cluster really is split.
    nodes = {client.get_node_from_key(f"{{tag{i}}}:k").name for i in range(30)}
    assert len(nodes) == 3
    client.set("{a}:x", 1)
    assert client.get("{a}:x") == b"1"


def test_redlock_servers_are_five_independent_masters(redlock_servers: list[RedisProcess]) -> None:
    run_ids = {server.run_id for server in redlock_servers}
    assert len(run_ids) == 5
    assert len({server.port for server in redlock_servers}) == 5
    for server in redlock_servers:
        assert server.client().info("replication")["role"] == "master"


def test_contract_fixture_gives_an_empty_database(redis_target) -> None:
    backend = redis_target.lock_backend()
    assert backend.ping() is True
    key = backend.key("probe", "x")
    assert redis_target.raw.get(key) is None
    backend.client.set(key, "1")
    assert redis_target.raw.get(key) == b"1"


def test_ports_lie_below_the_ephemeral_range() -> None:
    """No test port can be a client's local port, so no connect can reach itself."""
    floor = ephemeral_floor()
    assert all(free_port() < floor for _ in range(50))
    assert all(free_port(cluster=True) + 10000 < floor for _ in range(50))


def test_a_closed_port_refuses_and_stays_reserved() -> None:
    port = closed_port()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    with socket.socket() as sock, pytest.raises(OSError):
        sock.bind(("127.0.0.1", port))
