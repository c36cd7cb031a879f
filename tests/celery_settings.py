"""Settings for the Celery worker subprocess of tests/test_celery.py (server from the env)."""

import os

from .settings import *  # noqa: F403

_ALIAS = {"LOCATION": os.environ["REDISLOCK_TEST_URL"], "KEY_PREFIX": "test"}
REDISLOCK_QUEUES = {"default": _ALIAS}
REDISLOCK_LOCKS = {"default": _ALIAS}
