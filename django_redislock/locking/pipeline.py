"""Many script calls in one pipeline: the watchdog's renewals and the admin index pages.

The batch itself (one round trip on a single server, one per master on a
Cluster, ``NOSCRIPT`` handled) is :mod:`django_redislock.calls.batch`; this
module runs it on a node, with its connection errors named after the setting.
"""

from __future__ import annotations

from typing import Any

from ..calls.batch import run_batch
from ..calls.node import Node
from ..calls.script import Call, sha_of

__all__ = ["Call", "run_scripts", "sha_of"]


def run_scripts(backend: Node, calls: list[Call]) -> list[Any]:
    """Send ``calls`` (script, keys, args) in one pipeline; return one result per call.

    A failed call's result is its exception. Calls the server answered
    ``NOSCRIPT`` (a restart, ``SCRIPT FLUSH``) did not run: their scripts are
    loaded and exactly those calls sent again, so no call runs twice.
    """
    if not calls:
        return []
    with backend.errors():
        return run_batch(backend.client, calls)
