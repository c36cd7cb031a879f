"""A server that forgets a script again between its reload and the call (single, cluster).

A ``SCRIPT FLUSH`` (or a restart) can land between the load that answers ``NOSCRIPT`` and
the call sent again: that second ``NOSCRIPT`` ran nothing either, so the call loads the
script again (a few times) instead of raising redis-py's ``NoScriptError`` out of a lock
call. Found by the lock history check (tests/lockhistory) on the cluster under faults.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import redis.asyncio

from django_redislock.calls.script import RELOADS, Script

from .conftest import RedisTarget
from .test_calls import primaries

KEYS = ["{t}:l:x", "{t}:ix:e"]
ARGS = ["owner", "1", "0", "x"]  # check a hold nobody has: -2


@pytest.fixture(params=["single", "cluster"])
def target(request: pytest.FixtureRequest) -> RedisTarget:
    found: RedisTarget = request.getfixturevalue(f"{request.param}_target")
    return found


def forgetful(target: RedisTarget, client: Any, times: int) -> list[int]:
    """Make the first ``times`` loads through ``client`` be followed by a real SCRIPT FLUSH."""
    loads: list[int] = []
    load = client.script_load

    def script_load(script: str) -> Any:
        result = load(script)
        loads.append(1)
        if len(loads) <= times:
            for server in primaries(target):
                server.script_flush()
        return result

    client.script_load = script_load
    return loads


def test_a_script_forgotten_again_after_its_reload_is_loaded_again(target: RedisTarget) -> None:
    script = Script("lock_extend")
    for server in primaries(target):
        server.script_flush()
    loads = forgetful(target, target.raw, RELOADS - 1)
    assert script.run(target.raw, KEYS, ARGS) == -2
    assert len(loads) == RELOADS


def test_a_script_the_server_keeps_forgetting_raises_after_a_few_loads(
    target: RedisTarget,
) -> None:
    script = Script("lock_extend")
    for server in primaries(target):
        server.script_flush()
    loads = forgetful(target, target.raw, RELOADS)
    with pytest.raises(redis.exceptions.NoScriptError):
        script.run(target.raw, KEYS, ARGS)
    assert len(loads) == RELOADS


def test_the_asyncio_call_loads_again_too(target: RedisTarget) -> None:
    client: Any
    if target.kind == "cluster":
        port = target.raw.get_default_node().port
        client = redis.asyncio.RedisCluster(host="127.0.0.1", port=port)
    else:
        kwargs = target.raw.connection_pool.connection_kwargs
        client = redis.asyncio.Redis(host=kwargs["host"], port=kwargs["port"])
    loads: list[int] = []
    load = client.script_load

    async def script_load(script: str) -> Any:
        result = await load(script)
        loads.append(1)
        if len(loads) < RELOADS:  # forgotten again after all loads but the last
            for server in primaries(target):
                server.script_flush()
        return result

    client.script_load = script_load

    async def run() -> Any:
        try:
            for server in primaries(target):
                server.script_flush()
            return await Script("lock_extend").run_async(client, KEYS, ARGS)
        finally:
            await client.aclose()

    assert asyncio.run(run()) == -2
    assert len(loads) == RELOADS
