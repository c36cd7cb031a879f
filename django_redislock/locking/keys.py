"""Where a lock lives in Redis: index buckets and key names (and the lock argument checks).

Every lock name is assigned to one of ``LOCK_INDEX_BUCKETS`` buckets
(``crc32(name) % buckets``). All keys of a lock *and* the admin index of its
bucket share the hash tag ``{lk<bucket>}``, so each script touches one cluster
slot and can update the lock and the index atomically::

    <prefix>:{lk<b>}:l:<name>     hash   mutex/reentrant hold: o=owner, f=fence, n=count,
                                         m=holder metadata (JSON), w=waited
    <prefix>:{lk<b>}:s:<name>     list   wake-up signal of a mutex (short-lived)
    <prefix>:{lk<b>}:q:<name>     zset   waiting callers (mutex, reentrant, rw reader/writer): req.
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
    <prefix>:{lk<b>}:ix:c         zset   coordination index: the main key of each semaphore
                                         (``sp:<name>``), fair lock (``fl:<name>``) and latch
                                         (``ln:<name>``) in use ->
                                         its latest hold or wait-lease deadline (ms, server
                                         clock); see :mod:`.coordindex`

The holder metadata lives in the lock's own hash, so it expires with the hold
and costs a grant no extra call. A release keeps the name in the index with
expiry 0 instead of removing it: the next grant of the same name then only
updates its expiry, and names that stay unused are pruned (every 16th grant
of the bucket prunes up to 64, and so does every listing).
"""

from __future__ import annotations

import weakref
import zlib
from dataclasses import dataclass, field
from typing import Any

from .. import validation
from ..calls.node import Node
from ..validation import MAX_LOCK_NAME_LENGTH
from ..validation import check_lock_name as check_name

__all__ = [
    "MAX_NAME_LENGTH",
    "BucketKeys",
    "bucket_keys",
    "bucket_of",
    "check_name",
    "check_seconds",
    "lock_key",
    "name_keys",
    "to_ms",
]

#: Longest lock name accepted, in characters.
MAX_NAME_LENGTH = MAX_LOCK_NAME_LENGTH


def check_seconds(value: Any, argument: str, *, allow_zero: bool = False) -> float:
    """:func:`~django_redislock.validation.check_seconds`, refusing zero unless told.

    The lock objects check a ``ttl`` (never zero) and a ``timeout`` (zero: do not
    wait) with it; the rule and its messages are the validation module's.
    """
    # the common case without the validation module's calls (a lock object is built per
    # call in the README's idiom); NaN, infinity and every refusal take the full check
    if type(value) in _NUMBERS and 0 < value <= validation.MAX_SECONDS:
        return float(value)
    return validation.check_seconds(value, argument, allow_zero=allow_zero)


_NUMBERS = (int, float)


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
    coord: str

    @classmethod
    def build(cls, backend: Node, bucket: int) -> BucketKeys:
        tag = f"lk{bucket}"
        return cls(*(backend.key(tag, "ix", part) for part in ("f", "t", "n", "e", "c")))


#: Most lock names whose keys one backend remembers (then it starts over).
MAX_NAMES = 4096


@dataclass
class _Names:
    """One backend's key names per lock name and per bucket, built once each."""

    names: dict[str, tuple[str, BucketKeys]] = field(default_factory=dict)
    buckets: dict[int, tuple[str, BucketKeys]] = field(default_factory=dict)


# per backend object: its prefix and bucket count never change (a settings change builds a
# new backend), so what they give a name is worked out once; a lock object is built per
# call in the README's idiom, and this was a third of building one
_names: weakref.WeakKeyDictionary[Any, _Names] = weakref.WeakKeyDictionary()


def name_keys(backend: Node, name: str) -> tuple[str, BucketKeys]:
    """``<prefix>:{lk<bucket>}`` and the bucket's index keys, for lock ``name``.

    :func:`lock_key` of ``name`` and ``part`` is ``f"{base}:{part}:{name}"``.
    """
    known = _names.get(backend)
    if known is None:
        known = _names.setdefault(backend, _Names())
    found = known.names.get(name)
    if found is None:
        bucket = bucket_of(name, backend.options["LOCK_INDEX_BUCKETS"])
        found = known.buckets.get(bucket)
        if found is None:
            tag = f"lk{bucket}"
            found = known.buckets[bucket] = (backend.key(tag), BucketKeys.build(backend, bucket))
        if len(known.names) >= MAX_NAMES:
            known.names.clear()
        known.names[name] = found
    return found


def lock_key(backend: Node, name: str, part: str) -> str:
    """The key ``part`` (``l``, ``s``, ``rw``, ...) of lock ``name``."""
    return f"{name_keys(backend, name)[0]}:{part}:{name}"


def bucket_keys(backend: Node, name: str) -> BucketKeys:
    """The index keys of the bucket of lock ``name``."""
    return name_keys(backend, name)[1]
