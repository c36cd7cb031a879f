"""A resent re-entry whose first send went into an older hold of the same owner grants nothing.

Found by the lock history check (cluster, seed 1128, a 10-minute soak): two processes share
``owner="job-0"``. Process B's reentrant acquire went into the owner's hold of the time and
its reply was held past the socket timeout; that hold ended (TTL); process A then got a new
hold of the owner with a new fence; B's resend of its acquire found its request id in the
bucket's memory and the owner holding, and was answered "granted, count as it is" without
counting itself. B believed it held a level the hold never counted: its release ended A's
hold, and a third process acquired while A still held.

A request is recorded with the bucket's fence counter (lock_acquire.lua): a resend belongs
to the current hold only if that score is at least the hold's fence.
"""

from __future__ import annotations

import time
from typing import Any

from .conftest import RedisTarget


def _run(backend: Any, call: tuple[str, list[str], list[Any]]) -> list[int]:
    script, keys, args = call
    return [int(x) for x in backend.script(script)(keys=keys, args=args)]


def test_a_resend_from_an_older_hold_is_not_a_grant_of_the_new_one(
    redis_target: RedisTarget,
) -> None:
    backend = redis_target.lock_backend()
    b = backend.lock("job", ttl=0.3, reentrant=True, owner="job-0")
    b._rid = "b-request-1"
    attempt = b._attempt("job-0", "{}", False, 0.0)
    first = _run(backend, attempt)
    assert first[0] == 1  # B's first send: granted, a hold of job-0 with its fence
    time.sleep(0.6)  # that hold ends by its TTL, unreleased
    a = backend.lock("job", ttl=30, reentrant=True, owner="job-0")
    assert a.acquire(blocking=False)  # A: a new hold of job-0, a newer fence
    assert a.fence > first[1]
    # B's resend of the same request arrives now: it belongs to the ended hold
    assert _run(backend, attempt)[0] == 0
    a_count = [h.count for h in backend.held_locks() if h.name == "job"]
    assert a_count == [1]  # A's level only
    a.release()
    assert not backend.lock("job", ttl=5).locked()
