"""The enqueue hot path: the direct sender, its fallbacks, registration and the JSON encoder."""

from __future__ import annotations

import datetime
import decimal
import json
import os
import uuid
from typing import Any

import pytest
import redis
from django.core.serializers.json import DjangoJSONEncoder

from django_redislock.calls.direct import DirectSender, direct_sender
from django_redislock.exceptions import InvalidArgument
from django_redislock.queue.serializers import JSONSerializer

from .conftest import RedisTarget, make_queue


def test_a_plain_client_gets_a_direct_sender_and_others_do_not(redis_target: RedisTarget) -> None:
    q = make_queue(redis_target)
    assert q.enqueue("a", {"v": 1}) is True
    sender = q._enqueue_head[2] if q._enqueue_head else None
    if redis_target.kind == "single":
        assert isinstance(sender, DirectSender)
    else:  # fakeredis and RedisCluster keep execute_command
        assert sender is None
    [task] = q.pop()
    assert (task.id, task.payload) == ("a", {"v": 1})


def test_direct_sends_are_one_request_each(single_target: RedisTarget) -> None:
    q = make_queue(single_target)
    q.enqueue("warm")
    from redis.connection import AbstractConnection

    sent: list[Any] = []
    original = AbstractConnection.send_packed_command

    def counting(self: Any, command: Any, check_health: bool = True) -> None:
        sent.append(command)
        original(self, command, check_health)

    AbstractConnection.send_packed_command = counting  # type: ignore[method-assign]
    try:
        assert q.enqueue("b", [1, "é"], delay=5) is True
        assert q.enqueue("b", None) is False
        assert q.enqueue_many([("c", 1), ("d", 2)]) == [True, True]
    finally:
        AbstractConnection.send_packed_command = original  # type: ignore[method-assign]
    assert len(sent) == 3
    [task] = q.tasks("delayed")
    assert (task.id, task.payload) == ("b", [1, "é"])


def test_a_killed_connection_is_not_reused(single_target: RedisTarget) -> None:
    q = make_queue(single_target)
    q.enqueue("warm")
    single_target.raw.client_kill_filter(_type="normal", skipme=True)
    assert q.enqueue("after-kill") is True  # the pool replaces the dead socket on checkout
    assert q.get("after-kill") is not None


def test_an_unreachable_server_names_the_setting_on_enqueue() -> None:
    from django_redislock.backends.redis import RedisQueueBackend
    from django_redislock.exceptions import ConnectionFailed

    backend = RedisQueueBackend(
        "down", {"LOCATION": "redis://127.0.0.1:1/0", "OPTIONS": {"SOCKET_CONNECT_TIMEOUT": 0.2}}
    )
    q = backend.queue("jobs")
    with pytest.raises(ConnectionFailed, match=r"REDISLOCK_QUEUES\['down'\]"):
        q.enqueue("a")  # fails registering the queue name
    backend.registered.add("jobs")
    with pytest.raises(ConnectionFailed, match=r"REDISLOCK_QUEUES\['down'\]"):
        q.enqueue("a")  # fails in the direct sender
    assert q._enqueue_head is not None and isinstance(q._enqueue_head[2], DirectSender)


def test_error_replies_are_raised(single_target: RedisTarget) -> None:
    q = make_queue(single_target)
    q.enqueue("warm")
    client: Any = q.backend.client
    pool = client.connection_pool
    with pytest.raises(redis.exceptions.NoScriptError):
        DirectSender(pool, ("EVALSHA", "0" * 40, 0)).call([])
    with pytest.raises(redis.ResponseError):
        DirectSender(pool, ("NOSUCHCOMMAND",)).call(["x"])
    assert q.enqueue("still-works") is True


def test_no_direct_sender_for_other_clients(single_target: RedisTarget) -> None:
    location = single_target.location
    head = ("PING",)
    single = redis.Redis.from_url(location, single_connection_client=True)
    assert direct_sender(single, head) is None
    sender = direct_sender(redis.Redis.from_url(location), head)
    assert sender is not None and sender.call([]) in (b"PONG", "PONG", True)

    class Custom(redis.Redis):
        pass

    assert direct_sender(Custom.from_url(location), head) is None


def test_a_forgotten_queue_name_is_registered_again(redis_target: RedisTarget) -> None:
    q = make_queue(redis_target, name="forgotten")
    q.enqueue("a")
    assert "forgotten" in q.backend.queue_names()
    q.backend.forget_queue("forgotten")
    assert "forgotten" not in q.backend.queue_names()
    q.enqueue("b")
    assert "forgotten" in q.backend.queue_names()


def test_a_forked_child_registers_and_connects_afresh(single_target: RedisTarget) -> None:
    q = make_queue(single_target, name="forked")
    q.enqueue("parent")
    single_target.raw.srem(q.backend.names_key, "forked")
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through its exit status
        ok = q.enqueue("child") and "forked" in q.backend.queue_names()
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert q.get("child") is not None


@pytest.mark.parametrize(
    "value",
    [
        None,
        "é",
        {"a": [1, 2.5, True, None], "b": {"c": (1, 2)}},
        datetime.datetime(2026, 11, 22, 1, 2, 3, 456789, tzinfo=datetime.timezone.utc),
        datetime.date(2026, 11, 22),
        datetime.time(1, 2, 3),
        datetime.timedelta(hours=1),
        decimal.Decimal("1.10"),
        uuid.UUID(int=7),
        {1: "int key", None: "none key"},
    ],
)
def test_the_json_fast_path_writes_what_djangos_encoder_writes(value: Any) -> None:
    encoder = DjangoJSONEncoder(separators=(",", ":"), allow_nan=False)
    assert JSONSerializer().dumps(value) == encoder.encode(value).encode()
    # inside an envelope (a dict: the C encoder built once, not encode())
    envelope = {"task": "t", "args": [value], "kwargs": {"v": value}}
    assert JSONSerializer().dumps(envelope) == encoder.encode(envelope).encode()


@pytest.mark.parametrize("value", [float("nan"), object(), {1j: 2}, {"s": {1, 2}}])
def test_the_json_fast_path_refuses_what_djangos_encoder_refuses(value: Any) -> None:
    with pytest.raises(InvalidArgument, match="payload is not JSON-serializable"):
        JSONSerializer().dumps(value)
    with pytest.raises(InvalidArgument, match="payload is not JSON-serializable"):
        JSONSerializer().dumps({"task": "t", "args": [value], "kwargs": {}})


@pytest.mark.parametrize(
    "data",
    [
        b'{"task":"app.tasks.send","args":[7],"kwargs":{}}',
        '{"é":["ü",1.5,null]}'.encode(),
        b"[1,2]",
        b'{"a":1}  \n',  # trailing whitespace
        b'{"a":1} x',  # extra data: the same error
        b'{"a":',  # cut short: the same error
        b'{"\\ud800":"lone surrogate escape"}',
        '{"s":"\ud800"}'.encode("utf-8", "surrogatepass"),  # a raw lone surrogate
        '{"a":1}'.encode("utf-16-le"),  # not UTF-8: json.loads guesses the encoding
        '{"a":1}'.encode("utf-16"),
        '{"a":1}'.encode("utf-8-sig"),
        b"{",
        b'"text"',
        b"12",
        b" {}",
        b"\xff{",
    ],
)
def test_the_json_fast_path_reads_what_json_loads_reads(data: bytes) -> None:
    def outcome(loads: Any) -> tuple[str, Any]:
        try:
            return "value", loads(data)
        except Exception as exc:
            return type(exc).__name__, str(exc)

    assert outcome(JSONSerializer().loads) == outcome(json.loads)


def test_a_payload_that_contains_itself_is_refused_and_nothing_is_written(
    single_target: RedisTarget,
) -> None:
    q = make_queue(single_target)
    loop: list[Any] = []
    loop.append(loop)
    with pytest.raises(InvalidArgument, match="payload is not JSON-serializable"):
        q.enqueue("loop", loop)
    assert q.get("loop") is None
    assert JSONSerializer().dumps({"fine": 1}) == b'{"fine":1}'


def test_the_direct_sender_packs_what_redis_py_packs(single_target: RedisTarget) -> None:
    client = redis.Redis.from_url(single_target.location)
    head = ("EVALSHA", "a" * 40, 2, "k:{q}:1", "k:{q}:2")
    args = ["1", "é-id", 0, -5, 12_345_678_901_234, 1.5, b"\x00\xffdata", memoryview(b"mv")]
    sender = direct_sender(client, head)
    assert sender is not None
    ours = b"*%d\r\n%b%b" % (len(head) + len(args), sender.head, sender.bulk(args))
    conn = client.connection_pool.get_connection()
    try:
        theirs = b"".join(bytes(part) for part in conn.pack_command(*head, *args))
    finally:
        client.connection_pool.release(conn)
    assert ours == theirs


def test_an_interrupted_call_drops_its_connection(
    single_target: RedisTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    q = make_queue(single_target)
    q.enqueue("warm")
    sender = q._enqueue_head[2] if q._enqueue_head else None
    assert isinstance(sender, DirectSender)
    from redis.connection import AbstractConnection

    dropped: list[Any] = []

    def interrupted(self: Any, *args: Any, **kwargs: Any) -> Any:
        raise KeyboardInterrupt

    original_disconnect = AbstractConnection.disconnect

    def disconnect(self: Any, *args: Any, **kwargs: Any) -> None:
        dropped.append(self)
        original_disconnect(self, *args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(AbstractConnection, "read_response", interrupted)
        patch.setattr(AbstractConnection, "disconnect", disconnect)
        with pytest.raises(KeyboardInterrupt):
            q.enqueue("interrupted")
    assert dropped  # its reply is never read by the next caller of that connection
    assert q.enqueue("next") is True
    assert q.get("interrupted") is not None and q.get("next") is not None


def test_the_direct_sender_encodes_in_the_clients_encoding(single_target: RedisTarget) -> None:
    client = redis.Redis.from_url(single_target.location, encoding="latin-1")
    sender = direct_sender(client, ("ECHO",))
    assert sender is not None and not sender.utf8
    assert sender.bulk(["é", 7, b"\xff"]) == b"$1\r\n\xe9\r\n$1\r\n7\r\n$1\r\n\xff\r\n"
    assert sender.call(["é"]) == "é".encode("latin-1")


@pytest.mark.parametrize("failures", [0, 1, 2, 3])
def test_a_direct_send_that_fails_is_retried_under_the_connections_policy(
    single_target: RedisTarget, monkeypatch: pytest.MonkeyPatch, failures: int
) -> None:
    """The first try runs outside redis-py's retry policy; a failed one is the policy's first
    try: with 2 retries, up to 3 sends, a disconnect after each failed one, and the last
    error raised (the connection dropped once more, as after any failed call)."""
    from redis.backoff import NoBackoff
    from redis.connection import AbstractConnection
    from redis.retry import Retry

    client = redis.Redis.from_url(single_target.location, retry=Retry(NoBackoff(), 2))
    sender = direct_sender(client, ("ECHO",))
    assert sender is not None
    assert sender.call(["warm"]) == b"warm"  # the thread's kept connection is open
    original_send = AbstractConnection.send_packed_command
    original_disconnect = AbstractConnection.disconnect
    sends, drops, left = [0], [0], [failures]

    def send(self: Any, command: Any, check_health: bool = True) -> None:
        if b"ECHO" in bytes(command[0]):  # not the handshake of a reconnect
            sends[0] += 1
            if left[0] > 0:
                left[0] -= 1
                raise redis.ConnectionError("injected")
        original_send(self, command, check_health)

    def disconnect(self: Any, *args: Any, **kwargs: Any) -> None:
        drops[0] += 1
        original_disconnect(self, *args, **kwargs)

    monkeypatch.setattr(AbstractConnection, "send_packed_command", send)
    monkeypatch.setattr(AbstractConnection, "disconnect", disconnect)
    if failures <= 2:
        assert sender.call(["x"]) == b"x"
        assert (sends[0], drops[0]) == (failures + 1, failures)
    else:
        with pytest.raises(redis.ConnectionError, match="injected"):
            sender.call(["x"])
        assert (sends[0], drops[0]) == (3, 4)
