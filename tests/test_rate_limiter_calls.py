"""How a rate limiter's admission reaches Redis: one prepared ``EVALSHA`` per take.

A take's keys are the limit's state (fixed) and a fresh request key (per take): the
prepared head carries the first, each call leads its arguments with the second. These
tests hold that path to the guarantees of the generic one: a plain client skips redis-py's
``execute_command`` (the direct sender), a server that forgot the script loads it again,
and an admission whose reply was lost and that the client resends is charged once.
"""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import pytest

from django_redislock.backends.redis import RedisLockBackend
from django_redislock.calls.direct import direct_pool
from django_redislock.exceptions import ConnectionFailed
from django_redislock.locking import limiter as limiter_module

from .conftest import RedisTarget
from .faults import Args, command_name
from .proxied import ProxiedTarget, cuts_only, resend_options

pytestmark = pytest.mark.timeout(60)


def evalsha_calls(raw: Any) -> int:
    return int(raw.info("commandstats").get("cmdstat_evalsha", {"calls": 0})["calls"])


def spy_execute_command(client: Any, sent: list[str]) -> None:
    real = client.execute_command

    def spy(*args: Any, **options: Any) -> Any:
        sent.append(str(args[0]))
        return real(*args, **options)

    client.execute_command = spy


def test_an_admission_is_one_evalsha_without_execute_command(single_target: RedisTarget) -> None:
    """On a plain client the take goes through the direct sender, as the lock calls do."""
    backend = single_target.lock_backend()
    limit = backend.rate_limiter("api", "1/m", burst=10, local_refusals=False)
    assert limit.try_acquire().admitted  # loads the script
    sent: list[str] = []
    spy_execute_command(backend.client, sent)
    before = evalsha_calls(single_target.raw)
    answers = [limit.try_acquire(key=key).admitted for key in ("a", "b", None, "a")]
    assert answers == [True, True, True, True]
    assert sent == [] and evalsha_calls(single_target.raw) == before + 4

    plain = single_target.lock_backend(DIRECT_SENDER=False)
    spy_execute_command(plain.client, sent)
    assert plain.rate_limiter("api", "1/m", burst=10).try_acquire().admitted
    assert sent == ["EVALSHA"]  # OPTIONS['DIRECT_SENDER'] = False keeps redis-py's path


def test_a_script_flush_between_admissions_loads_it_again(redis_target: RedisTarget) -> None:
    limit = redis_target.lock_backend().rate_limiter("api", "1/m", burst=3, local_refusals=False)
    assert limit.try_acquire().admitted
    redis_target.raw.script_flush()  # as after a restart: the server forgot every script
    assert limit.try_acquire().admitted  # NOSCRIPT ran nothing: loaded, sent once more
    redis_target.raw.script_flush()

    async def main() -> bool:
        return (await limit.try_acquire_async()).admitted

    assert asyncio.run(main())
    assert not limit.try_acquire().admitted  # three units charged, one per admission


def test_each_key_keeps_its_prepared_call_up_to_the_bound(
    redis_target: RedisTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(limiter_module, "MAX_HEADS", 2)
    limit = redis_target.lock_backend().rate_limiter("api", "1/m", burst=1)
    assert [limit.try_acquire(key=k).admitted for k in ("a", "b", "c", 7)] == [True] * 4
    assert list(limit._heads) == ["c", "7"]  # the oldest went first
    remote = redis_target.lock_backend().rate_limiter("api", "1/m", burst=1, local_refusals=False)
    assert not any(remote.try_acquire(key=k).admitted for k in ("a", "b", "c", "7"))


def test_an_unreachable_server_is_connection_failed() -> None:
    """The prepared path hands client errors to ``backend.errors()`` as the generic one did."""
    with socket.socket() as probe:  # a port nobody listens on once it is closed
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    params = {"LOCATION": f"redis://127.0.0.1:{port}/0", "OPTIONS": {"SOCKET_TIMEOUT": 1}}
    limit = RedisLockBackend("gone", params).rate_limiter("api", "1/m", local_refusals=False)
    with pytest.raises(ConnectionFailed, match="unreachable"):
        limit.try_acquire()


def rate_takes(args: Args) -> bool:
    return command_name(args) in (b"EVALSHA", b"EVAL") and any(b":req:" in a for a in args)


@pytest.mark.parametrize("kind", ["single", "cluster"])
def test_a_resent_admission_after_a_lost_reply_is_charged_once(
    kind: str, request: pytest.FixtureRequest
) -> None:
    """The proxy drops the reply of an admission Redis ran and cuts the connection; the
    client resends the same call (same request key): one unit is charged, not two."""
    target: ProxiedTarget = request.getfixturevalue(f"proxied_{kind}")
    backend = target.lock_backend(**resend_options(kind), **cuts_only(kind))
    if kind == "single":  # the resend is the direct sender's, under the connection's Retry
        assert direct_pool(backend.client) is not None
    limit = backend.rate_limiter(f"api-{target.prefix}", "1/m", burst=3, local_refusals=False)
    assert limit.try_acquire().admitted  # loads the script: no NOSCRIPT round in the count
    seen = target.count(rate_takes)
    faults = target.drop_reply(rate_takes, then="cut")
    assert limit.try_acquire().admitted  # answered from the first run's record
    target.clear()
    assert sum(len(f.hits) for f in faults) == 1, "the fault never met the call"
    assert target.count(rate_takes) - seen == 2, "the call was not sent exactly twice"
    assert limit.try_acquire().admitted  # the burst's third unit: the resend charged nothing
    assert not limit.try_acquire().admitted
