"""Name the key behind a ``WRONGTYPE`` error: which of a queue's keys holds another type.

Redis says "WRONGTYPE Operation against a key holding the wrong kind of value"
without the key, and a queue script touches a dozen keys. Only when a page got
that error, one pipeline of ``TYPE`` over the queue's keys finds the ones whose
type is not the one the app writes there (another program wrote them), so the
page can say which key to look at.
"""

from __future__ import annotations

from typing import Any

from ..exceptions import RedisLockError
from ..queue.keys import CLAIMS_PART, KEY_PARTS
from ..queue.priority import PRIORITY_PARTS
from ..wire import to_text

#: The type the app writes at each key of a queue (by key part).
EXPECTED = {
    **dict(zip(KEY_PARTS, ("zset", "zset", "zset", "hash", "hash", "hash", "list"), strict=True)),
    CLAIMS_PART: "hash",
    **dict(zip(PRIORITY_PARTS, ("zset", "hash"), strict=True)),
    "enqueued": "hash",
    "flow": "hash",
    "rates": "hash",
    "history": "hash",
    "history-index": "zset",
    "runs-ok": "list",
    "runs-failed": "list",
    "counters": "hash",
}


def queue_keys(queue: Any) -> list[tuple[str, str]]:
    """``(key, expected type)`` of every key of ``queue``."""
    return [(queue.backend.key(f"q:{queue.name}", part), kind) for part, kind in EXPECTED.items()]


def wrong_keys(queue: Any) -> list[tuple[str, str, str]]:
    """``(key, type found, type expected)`` of the queue's keys holding another type."""
    keys = queue_keys(queue)
    client = queue.backend.client
    with queue.backend.errors():
        pipe = client.pipeline(transaction=False)
        for key, _ in keys:
            pipe.type(key)
        found = [to_text(kind) for kind in pipe.execute()]
    return [
        (key, kind, expected)
        for (key, expected), kind in zip(keys, found, strict=True)
        if kind not in ("none", expected)
    ]


def explain(queue: Any, error: str) -> str:
    """``error``, with the keys of the wrong type named when it is a ``WRONGTYPE`` error."""
    if "WRONGTYPE" not in error:
        return error
    try:
        wrong = wrong_keys(queue)
    except RedisLockError:
        return error
    if not wrong:
        return error
    named = "; ".join(
        f"key {key!r} holds a {kind}, not a {expected}" for key, kind, expected in wrong
    )
    return f"{error} ({named})"
