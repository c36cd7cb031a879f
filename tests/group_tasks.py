"""Tasks of a concurrency group for the process tests of tests/test_groups_process.py.

``tenant_work`` counts its runs of a tenant in Redis while they last (``INCR`` on start,
``DECR`` at the end) and records each count it saw on start, so a test can check that no
more than ``group_concurrency`` ran at once, across worker processes. Only the first run of
a call sleeps ``seconds``: the rerun of a call whose worker was killed ends at once.
"""

from __future__ import annotations

import os
import time
from typing import Any

from django_redislock import queues, task

#: per tenant: how many of its runs are running now, and every count seen at a start
RUNNING_KEY = "test:{grp}:running:"
SEEN_KEY = "test:{grp}:seen:"
STARTS_KEY = "test:{grp}:starts"
#: per run ``tenant:n``: set by its first run (a rerun does not sleep)
RAN_KEY = "test:{grp}:ran:"


def _client() -> Any:
    return queues["default"].client  # type: ignore[attr-defined]


@task(queue="grouped", group_key=lambda tenant, *_a, **_kw: tenant, group_concurrency=2)
def tenant_work(tenant: str, n: int, seconds: float) -> None:
    client = _client()
    now = client.incr(RUNNING_KEY + tenant)
    client.rpush(SEEN_KEY + tenant, now)
    client.rpush(STARTS_KEY, f"{tenant}:{n}:{os.getpid()}")
    try:
        if client.set(f"{RAN_KEY}{tenant}:{n}", 1, nx=True):  # the first run only
            time.sleep(seconds)
    finally:
        client.decr(RUNNING_KEY + tenant)


def seen(tenant: str) -> list[int]:
    """Every count of running ``tenant`` runs seen when one of them started."""
    return [int(v) for v in _client().lrange(SEEN_KEY + tenant, 0, -1)]


def starts() -> list[str]:
    """``tenant:n:pid`` of every run started, in order."""
    return [v.decode() for v in _client().lrange(STARTS_KEY, 0, -1)]


def forget_running(tenant: str) -> None:
    """Reset the running count of ``tenant`` (its runs were killed before their ``DECR``)."""
    _client().delete(RUNNING_KEY + tenant)
