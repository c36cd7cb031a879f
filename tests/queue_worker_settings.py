"""Settings for drain_queue subprocesses started by the queue tests.

The test passes the server in ``REDISLOCK_TEST_URL`` (and JSON ``OPTIONS`` in
``REDISLOCK_TEST_OPTIONS``); nothing here falls back to a default server.
"""

import json
import os

from .settings import *  # noqa: F403

_ALIAS = {
    "LOCATION": os.environ["REDISLOCK_TEST_URL"],
    "KEY_PREFIX": "test",
    "OPTIONS": json.loads(os.environ.get("REDISLOCK_TEST_OPTIONS", "{}")),
}
REDISLOCK_QUEUES = {"default": _ALIAS}
REDISLOCK_LOCKS = {"default": {"LOCATION": os.environ["REDISLOCK_TEST_URL"]}}
# task modules besides the apps' tasks modules (a test may list a broken one)
REDISLOCK_TASK_MODULES = json.loads(os.environ.get("REDISLOCK_TEST_TASK_MODULES", "[]"))
