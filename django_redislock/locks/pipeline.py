"""Many script calls in one pipeline: the watchdog's renewals and the admin index pages.

On a single server a pipeline is one round trip; redis-py's cluster pipeline
sends one request per master that owns a key of the batch.
"""

from __future__ import annotations

import hashlib
from functools import cache
from typing import Any

import redis

from ..scripts import source

Call = tuple[str, list[str], list[Any]]


@cache
def sha_of(name: str) -> str:
    """The SHA1 under which Redis caches the script ``name``."""
    return hashlib.sha1(source(name).encode()).hexdigest()


def run_scripts(backend: Any, calls: list[Call]) -> list[Any]:
    """Send ``calls`` (script, keys, args) in one pipeline; return one result per call.

    A failed call's result is its exception. When the server had forgotten a
    script (restart, ``SCRIPT FLUSH``), the scripts are loaded and the batch resent.
    """
    if not calls:
        return []
    client = backend.client
    with backend.errors():
        results = _send(client, calls)
        if any(isinstance(r, redis.exceptions.NoScriptError) for r in results):
            for name in {call[0] for call in calls}:
                client.script_load(source(name))
            results = _send(client, calls)
    return results


def _send(client: Any, calls: list[Call]) -> list[Any]:
    pipe = client.pipeline(transaction=False)
    for name, keys, args in calls:
        pipe.execute_command("EVALSHA", sha_of(name), len(keys), *keys, *args)
    return list(pipe.execute(raise_on_error=False))
