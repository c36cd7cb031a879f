"""The Redis keys of one queue: their names, and which script takes which.

Every key of a queue shares the hash tag ``{q:<name>}``, so any script of the queue runs on
one Cluster slot. The scripts take :attr:`QueueKeys.script_keys` first (the seven of
:data:`KEY_PARTS`, the claims hash, the priority keys, the enqueue times), then the extra
keys of their operation (see :mod:`.calls`). docs/queue.md lists every key with its type.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..validation import check_name
from .flow import FLOW_PART
from .group_keys import GROUP_PARTS
from .priority import PRIORITY_PARTS

if TYPE_CHECKING:
    from ..backends.redis import RedisQueueBackend

#: The queue's keys, in the order of every script's KEYS.
KEY_PARTS = ("pending", "inflight", "dead", "payload", "attempts", "errors", "signal")
#: The hash of claim tokens, the eighth key of the queue scripts (not in ``Queue.keys``,
#: which the admin and metrics scripts take as their first seven keys).
CLAIMS_PART = "claims"


class QueueKeys:
    """The name and the Redis keys of one queue (built once per queue object)."""

    def __init__(self, backend: RedisQueueBackend, name: str) -> None:
        self.backend = backend
        self.name = check_name(name)
        self.keys = [backend.key(f"q:{name}", part) for part in KEY_PARTS]
        #: the keys every queue script takes: ``keys``, the claims hash, the priority keys
        #: and the enqueue times
        self.claims_key = backend.key(f"q:{name}", CLAIMS_PART)
        #: the priority index zset and the levels hash (see queue/priority.py)
        self.priority_keys = [backend.key(f"q:{name}", part) for part in PRIORITY_PARTS]
        #: task id -> server time (µs) it was queued, kept as long as its payload
        self.enqueued_key = backend.key(f"q:{name}", "enqueued")
        self.script_keys = [*self.keys, self.claims_key, *self.priority_keys, self.enqueued_key]
        self.signal_key = self.keys[KEY_PARTS.index("signal")]
        #: pause and rate limit (see :mod:`.flow`), read by every claim
        self.flow_key = backend.key(f"q:{name}", FLOW_PART)
        #: the rate buckets (:mod:`.rates`): the enqueue scripts' key after ``script_keys``
        self.rates_key = backend.key(f"q:{name}", "rates")
        #: the task history (:mod:`.history`): the retry script's keys after ``script_keys``
        self.history_key = backend.key(f"q:{name}", "history")
        self.history_index_key = backend.key(f"q:{name}", "history-index")
        #: the run log (:mod:`.runlog`): successes, and every other end of a run
        self.runs_ok_key = backend.key(f"q:{name}", "runs-ok")
        self.runs_failed_key = backend.key(f"q:{name}", "runs-failed")
        #: per task function counts and runtimes (:mod:`.fnstats`), written by the worker
        self.fnstats_key = backend.key(f"q:{name}", "fnstats")
        #: id -> enqueue time of the copy to cancel (see queue_cancel.lua): read by renewals
        self.cancel_key = backend.key(f"q:{name}", "cancel")
        #: id -> server µs its ``unique_for`` window ends: written by the acks, read by the
        #: enqueues of ``@task(unique_for=...)`` (see queue_enqueue.lua); expires by itself
        self.unique_key = backend.key(f"q:{name}", "unique")
        #: the concurrency groups' hold zset, groups hash and wait zset (see .groups)
        self.group_keys = tuple(backend.key(f"q:{name}", part) for part in GROUP_PARTS)
