"""The fault proxy itself: each fault does what it says, on a real server, and cleans up."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from django_redislock.exceptions import ConnectionFailed

from .faults import FaultProxy, contains, frame_end, parse_request
from .proxied import ProxiedTarget
from .servers import RedisProcess


def client(proxy: FaultProxy, timeout: float = 0.5, retries: int = 0) -> redis.Redis:
    return redis.Redis(
        host="127.0.0.1", port=proxy.port, socket_timeout=timeout, retry=Retry(NoBackoff(), retries)
    )


@pytest.fixture
def proxy(redis_server: RedisProcess) -> Iterator[FaultProxy]:
    redis_server.client().flushall()
    with FaultProxy(("127.0.0.1", redis_server.port)) as running:
        yield running


def test_resp_framing() -> None:
    assert frame_end(b"+OK\r\n") == 5
    assert frame_end(b"$3\r\nabc\r\n+x") == 9
    assert frame_end(b"$3\r\nab") is None
    assert frame_end(b"*2\r\n:1\r\n$-1\r\n") == 13
    assert frame_end(b"*2\r\n:1\r\n") is None
    assert frame_end(b"%1\r\n+a\r\n:1\r\n") == 12
    assert frame_end(b"|1\r\n+k\r\n+v\r\n:7\r\n") == 16  # an attribute, then its reply
    assert parse_request(b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n*1") == ((b"GET", b"k"), 20)
    assert parse_request(b"*2\r\n$3\r\nGET\r\n$1\r\n") is None
    assert parse_request(b"PING\r\n") == ((b"PING",), 6)


def test_passes_through_and_counts(proxy: FaultProxy) -> None:
    c = client(proxy)
    assert c.set("k", "v") and c.get("k") == b"v"
    pipe = c.pipeline(transaction=True)
    pipe.incr("n")
    pipe.incr("n")
    pipe.get("k")
    assert pipe.execute() == [1, 2, b"v"]
    assert proxy.count("SET") == 1 and proxy.count("INCRBY") == 2
    assert proxy.count() >= 6  # SET, GET, MULTI, INCR x2, GET, EXEC; setup commands left out
    c.close()
    assert proxy.count("GET") == 2


def test_drop_reply_then_cut_runs_the_command_and_fails_the_client(
    proxy: FaultProxy, redis_server: RedisProcess
) -> None:
    c = client(proxy)
    fault = proxy.drop_reply("INCRBY")
    with pytest.raises(redis.ConnectionError):
        c.incr("n")
    assert fault.wait(1) and fault.hits == [(b"INCRBY", b"n", b"1")]
    assert redis_server.client().get("n") == b"1"  # it ran
    assert c.incr("n") == 2  # one shot: the next one passes


def test_drop_reply_silent_times_out(proxy: FaultProxy, redis_server: RedisProcess) -> None:
    c = client(proxy, timeout=0.3)
    proxy.drop_reply(contains("victim"), then="silent")
    c.set("other", 1)
    started = time.monotonic()
    with pytest.raises(redis.TimeoutError):
        c.set("victim", 1)
    assert time.monotonic() - started >= 0.25
    assert redis_server.client().get("victim") == b"1"


def test_a_retrying_client_resends_after_a_dropped_reply(
    proxy: FaultProxy, redis_server: RedisProcess
) -> None:
    c = client(proxy, retries=1)
    proxy.drop_reply("INCRBY")
    assert c.incr("n") == 2  # the first INCRBY ran, its reply was lost, the resend ran again
    assert proxy.count("INCRBY") == 2


def test_cut_mid_reply(proxy: FaultProxy, redis_server: RedisProcess) -> None:
    c = client(proxy)
    c.set("big", "x" * 100_000)
    fault = proxy.cut_mid_reply("GET")
    with pytest.raises(redis.ConnectionError):
        c.get("big")
    assert fault.wait(1)
    assert c.get("big") == b"x" * 100_000


def test_delay_reply(proxy: FaultProxy) -> None:
    c = client(proxy, timeout=2)
    fault = proxy.delay_reply(0.3, "GET")
    started = time.monotonic()
    c.get("k")
    assert time.monotonic() - started >= 0.3
    c.get("k")
    # the second GET went through undelayed: the fault fired once (``times=1``); its
    # duration is not asserted, a loaded machine can take 0.3 s for any round trip
    assert len(fault.hits) == 1 and not fault.armed


def test_stall_down_lets_the_command_run(proxy: FaultProxy, redis_server: RedisProcess) -> None:
    c = client(proxy, timeout=0.3)
    c.ping()
    proxy.stall(5, "down")
    with pytest.raises(redis.TimeoutError):
        c.set("k", 1)
    assert redis_server.client().get("k") == b"1"
    proxy.resume()


def test_stall_up_holds_the_request(proxy: FaultProxy, redis_server: RedisProcess) -> None:
    c = client(proxy, timeout=0.3)
    c.ping()
    proxy.stall(5, "up")
    with pytest.raises(redis.TimeoutError):
        c.set("k", 1)
    assert redis_server.client().get("k") is None
    proxy.resume()


def test_a_stall_ends_by_itself(proxy: FaultProxy) -> None:
    c = client(proxy, timeout=2)
    c.ping()
    proxy.stall(0.3)
    started = time.monotonic()
    assert c.set("k", 1)  # within the client's 2 s timeout: the stall ended by itself
    assert time.monotonic() - started >= 0.25


def test_drop_request(proxy: FaultProxy, redis_server: RedisProcess) -> None:
    c = client(proxy, timeout=0.3)
    fault = proxy.drop_request("SET")
    with pytest.raises(redis.TimeoutError):
        c.set("k", 1)
    assert fault.fired.is_set() and redis_server.client().get("k") is None


def test_noscript_does_not_fire_a_rule(proxy: FaultProxy, redis_server: RedisProcess) -> None:
    redis_server.client().script_flush()
    c = client(proxy)
    script = c.register_script("return redis.call('INCR', KEYS[1])")
    fault = proxy.drop_reply(contains("cnt"))
    with pytest.raises(redis.ConnectionError):
        script(keys=["cnt"])  # NOSCRIPT passes; SCRIPT LOAD; the second EVALSHA's reply is lost
    assert fault.hits[0][0] == b"EVALSHA" and proxy.count("EVALSHA") == 2
    assert redis_server.client().get("cnt") == b"1"


def test_cut_all_and_close_leave_nothing_running(redis_server: RedisProcess) -> None:
    before = threading.active_count()
    proxy = FaultProxy(("127.0.0.1", redis_server.port)).start()
    c = client(proxy)
    c.ping()
    assert proxy.connections == 1 and proxy.cut_all() == 1
    time.sleep(0.05)
    assert proxy.connections == 0
    assert c.ping()  # redis-py sees the reset idle connection and opens a new one
    assert proxy.connections == 1
    proxy.close()
    assert threading.active_count() == before
    with pytest.raises(OSError), socket.create_connection(proxy.address, timeout=0.5):
        pass


def test_proxied_targets_reach_their_servers(proxied_target: ProxiedTarget) -> None:
    backend = proxied_target.lock_backend()
    lock = backend.lock("reach", ttl=5)
    assert lock.acquire(timeout=2)
    lock.release()
    # every master (Redlock) or the key's node (cluster) saw the lock's traffic through a proxy
    seen = [proxy.count() > 0 for proxy in proxied_target.proxies]
    assert all(seen) if proxied_target.kind != "cluster" else any(seen)
    assert proxied_target.count() >= 2


def test_cluster_clients_only_use_the_proxies(proxied_cluster: ProxiedTarget) -> None:
    backend = proxied_cluster.lock_backend()
    for i in range(30):  # names spread over the three nodes
        with backend.lock(f"spread{i}", ttl=5, timeout=2):
            pass
    assert all(proxy.count() > 0 for proxy in proxied_cluster.proxies)
    # With every proxy stalled (for longer than an acquire's bounded resolution of its
    # unknown outcome), nothing gets through.
    proxied_cluster.stall(30, "up")
    with pytest.raises((ConnectionFailed, redis.RedisClusterException)):
        backend.lock("spread0", ttl=5).acquire(timeout=0.5)
    proxied_cluster.clear()


def test_replies_pair_with_their_requests_in_a_long_pipeline(proxy: FaultProxy) -> None:
    c = client(proxy, timeout=2)
    pipe = c.pipeline(transaction=False)
    for i in range(300):
        pipe.set(f"k{i}", "v" * (i * 50))
        pipe.get(f"k{i}")
    fault = proxy.delay_reply(0.05, contains("k150"), times=2)
    replies = pipe.execute()
    assert replies[1::2] == [b"v" * (i * 50) for i in range(300)]
    assert fault.hits == [(b"SET", b"k150", b"v" * 7500), (b"GET", b"k150")]


def test_resp3_replies_and_pushes(proxy: FaultProxy) -> None:
    c = redis.Redis(
        host="127.0.0.1", port=proxy.port, protocol=3, socket_timeout=2, retry=Retry(NoBackoff(), 0)
    )
    c.hset("h", mapping={"a": 1, "b": 2})
    assert c.hgetall("h") == {b"a": b"1", b"b": b"2"}  # a RESP3 map
    pubsub = c.pubsub()
    pubsub.subscribe("chan")
    assert pubsub.get_message(timeout=1)["type"] == "subscribe"
    redis.Redis(host="127.0.0.1", port=proxy.port).publish("chan", "hello")
    message = pubsub.get_message(timeout=2)
    assert message is not None and message["data"] == b"hello"
    pubsub.close()
    fault = proxy.drop_reply("HGETALL")
    with pytest.raises(redis.ConnectionError):
        c.hgetall("h")
    assert fault.fired.is_set()


def test_async_clients_reach_their_servers_through_the_proxies(
    proxied_target: ProxiedTarget,
) -> None:
    backend = proxied_target.lock_backend()
    name = f"reach-async-{proxied_target.kind}"

    async def cycle() -> int:
        lock = backend.lock(name, ttl=5)
        assert await lock.acquire_async(timeout=2)
        fence = lock.fence
        await lock.release_async()
        return fence

    before = proxied_target.count()
    assert asyncio.run(cycle()) >= 1
    assert proxied_target.count() >= before + 2


def test_cluster_redirections_name_the_proxies(proxied_cluster: ProxiedTarget) -> None:
    proxy = proxied_cluster.proxies[0]
    client = redis.Redis(host="127.0.0.1", port=proxy.port, retry=Retry(NoBackoff(), 0))
    for i in range(50):  # some key lives on another node: its MOVED names that node's proxy
        try:
            client.get(f"key{i}")
        except redis.ResponseError as exc:
            port = int(str(exc).rsplit(":", 1)[1])
            assert port in {p.port for p in proxied_cluster.proxies}
            return
    raise AssertionError("no key of 50 lived on another node")
