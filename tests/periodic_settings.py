"""Settings for run_scheduler subprocesses: the queue worker settings plus schedules.

The test passes ``REDISLOCK_PERIODIC_TASKS`` as JSON in ``REDISLOCK_TEST_PERIODIC``; the lock
alias reaches the same server (or cluster) as the queue alias.
"""

import json
import os

from .queue_worker_settings import *  # noqa: F403
from .queue_worker_settings import _ALIAS

REDISLOCK_LOCKS = {"default": _ALIAS}
REDISLOCK_PERIODIC_TASKS = json.loads(os.environ.get("REDISLOCK_TEST_PERIODIC", "{}"))
