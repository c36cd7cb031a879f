"""Where a lock lives in Redis: argument checks, index buckets and key names.

Every lock name is assigned to one of ``LOCK_INDEX_BUCKETS`` buckets
(``crc32(name) % buckets``). All keys of a lock *and* the admin index of its
bucket share the hash tag ``{lk<bucket>}``, so each script touches one cluster
slot and can update the lock and the index atomically::

    <prefix>:{lk<b>}:l:<name>     hash   mutex/reentrant hold: o=owner, f=fence, n=count,
                                         m=holder metadata (JSON), w=waited
    <prefix>:{lk<b>}:s:<name>     list   wake-up signal of a mutex (short-lived)
    <prefix>:{lk<b>}:q:<name>     zset   waiting callers (mutex, reentrant, rw writer): request
                                         id or owner -> wait deadline (ms, server clock); expires
                                         on its own a second after its last deadline
    <prefix>:{lk<b>}:rw:<name>    hash   read-write lock writer: o=owner, f=fence, m=metadata
    <prefix>:{lk<b>}:rr:<name>    zset   read-write lock readers: <owner>@<fence> -> deadline (ms)
    <prefix>:{lk<b>}:rm:<name>    hash   the latest reader's m=metadata and f=fence
    <prefix>:{lk<b>}:ri:<name>    string a waiting writer's intent (blocks new readers)
    <prefix>:{lk<b>}:sr:<name>    list   wake-up signal for readers
    <prefix>:{lk<b>}:sw:<name>    list   wake-up signal for writers
    <prefix>:{lk<b>}:ix:f         string fence counter of the bucket (never expires)
    <prefix>:{lk<b>}:ix:t         zset   request memory: recent releases, reentrant steps, read
                                         grants and take-backs (resend detection), ~1024 kept
    <prefix>:{lk<b>}:ix:n         zset   lock names, score 0 (paged by name)
    <prefix>:{lk<b>}:ix:e         zset   lock name -> expiry (ms, server clock; 0: released)

The holder metadata lives in the lock's own hash, so it expires with the hold
and costs a grant no extra call. A release keeps the name in the index with
expiry 0 instead of removing it: the next grant of the same name then only
updates its expiry, and names that stay unused are pruned (every 16th grant
of the bucket prunes up to 64, and so does every listing).
"""

from __future__ import annotations

import math
import re
import zlib
from dataclasses import dataclass
from typing import Any

from ..calls.node import Node
from ..conf import MAX_SECONDS
from ..exceptions import InvalidArgument

#: Longest lock name accepted, in characters.
MAX_NAME_LENGTH = 512
_BAD_NAME = re.compile(r"[{}\x00-\x1f\x7f]")


def check_name(name: Any, argument: str = "name") -> str:
    """Return ``name`` if it can be a lock name, else raise :class:`InvalidArgument`.

    Braces would change the cluster hash tag and control characters make names
    unreadable in the admin, so both are refused rather than escaped.
    """
    if not isinstance(name, str):
        raise InvalidArgument(f"{argument} must be a str, not {type(name).__name__}")
    if not name or name.isspace():
        raise InvalidArgument(f"{argument} must be a non-empty string")
    if len(name) > MAX_NAME_LENGTH:
        raise InvalidArgument(f"{argument} is longer than {MAX_NAME_LENGTH} characters")
    if _BAD_NAME.search(name):
        raise InvalidArgument(
            f"{argument} {name!r} contains braces or control characters, which would break "
            f"the Redis key layout"
        )
    return name


def check_seconds(value: Any, argument: str, *, allow_zero: bool = False) -> float:
    """Return ``value`` as float seconds, or raise :class:`InvalidArgument` naming ``argument``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        raise InvalidArgument(f"{argument} must be a number of seconds, not {value!r}")
    low_ok = value >= 0 if allow_zero else value > 0
    if not low_ok or value > MAX_SECONDS:
        bound = ">= 0" if allow_zero else "> 0"
        raise InvalidArgument(
            f"{argument} must be {bound} and <= {MAX_SECONDS:g} seconds, got {value!r}"
        )
    return float(value)


def to_ms(seconds: float) -> int:
    """Seconds to whole milliseconds, never below 1 (Redis rejects a PX of 0)."""
    return max(1, int(seconds * 1000))


def bucket_of(name: str, buckets: int) -> int:
    """The index bucket of ``name``: stable across processes and Python versions."""
    return zlib.crc32(name.encode()) % buckets


@dataclass(frozen=True)
class BucketKeys:
    """The index keys of one bucket (all in the bucket's slot)."""

    fence: str
    released: str
    names: str
    expiry: str

    @classmethod
    def build(cls, backend: Node, bucket: int) -> BucketKeys:
        tag = f"lk{bucket}"
        return cls(*(backend.key(tag, "ix", part) for part in ("f", "t", "n", "e")))


def lock_key(backend: Node, name: str, part: str) -> str:
    """The key ``part`` (``l``, ``s``, ``rw``, ...) of lock ``name``."""
    bucket = bucket_of(name, backend.options["LOCK_INDEX_BUCKETS"])
    return str(backend.key(f"lk{bucket}", part, name))


def bucket_keys(backend: Node, name: str) -> BucketKeys:
    """The index keys of the bucket of lock ``name``."""
    return BucketKeys.build(backend, bucket_of(name, backend.options["LOCK_INDEX_BUCKETS"]))
