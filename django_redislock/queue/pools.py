"""Which pools a worker may use, how many runs at once, and the lease of a claim."""

from __future__ import annotations

from typing import Any

from ..exceptions import InvalidArgument
from ..validation import check_int
from .records import Claim

#: The pools ``drain_queue --pool`` offers here (``process`` is a supervisor of solo workers).
POOLS = ("solo", "thread", "async")
#: Runs at once of a thread or async pool by default: I/O-bound tasks on a small server.
DEFAULT_CONCURRENCY = 8


def claim_lease(claim: Claim) -> float:
    """The lease (seconds) the tasks of ``claim`` were claimed under (0 when it has none)."""
    first = claim.tasks[0].lease_deadline if claim.tasks else None
    return (first - claim.now) / 1e6 if first is not None else 0.0


def default_concurrency(pool: str) -> int:
    """Runs at once when neither ``concurrency=`` nor ``OPTIONS['WORKER_CONCURRENCY']`` says."""
    return 1 if pool == "solo" else DEFAULT_CONCURRENCY


def check_pool(pool: Any, concurrency: Any) -> None:
    """``InvalidArgument`` naming ``pool`` or ``concurrency`` when either is wrong."""
    if pool not in POOLS:
        raise InvalidArgument(f"pool must be one of {', '.join(POOLS)}, got {pool!r}")
    check_int(concurrency, "concurrency", 1)
    if pool == "solo" and concurrency != 1:
        raise InvalidArgument(
            f"concurrency must be 1 with the solo pool, got {concurrency}; "
            "use the thread or async pool to run tasks at once"
        )
