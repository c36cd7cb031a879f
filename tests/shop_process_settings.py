"""Settings for the shop processes the seckill tests start (buyers, workers, reports).

The test passes the Redis server in ``REDISLOCK_TEST_URL`` (JSON ``OPTIONS`` in
``REDISLOCK_TEST_OPTIONS``) and a SQLite file in ``SHOP_TEST_DB``; nothing here
falls back to a default server.
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
REDISLOCK_LOCKS = {"default": _ALIAS}
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": os.environ.get("SHOP_TEST_DB", ":memory:"),
        "OPTIONS": {"timeout": 30},  # type: ignore[dict-item]
    }
}
