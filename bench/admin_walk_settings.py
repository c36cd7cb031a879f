"""Settings of the admin walk's server (bench/admin_walk.py): the test settings on one server.

The Redis server and the SQLite file come from the environment the benchmark sets
(``ADMIN_WALK_REDIS``, ``ADMIN_WALK_DB``); a middleware adds a ``Server-Timing`` header
so the walk reads each page's time in the server, not only what the browser saw.
"""

import os
import time
from typing import Any

from tests.settings import *  # noqa: F403
from tests.settings import MIDDLEWARE

DEBUG = False
DATABASES = {
    "default": {"ENGINE": "django.db.backends.sqlite3", "NAME": os.environ["ADMIN_WALK_DB"]}
}
_REDIS = {"LOCATION": os.environ["ADMIN_WALK_REDIS"], "KEY_PREFIX": "walk"}
REDISLOCK_LOCKS = {"default": _REDIS}
REDISLOCK_QUEUES = {"default": _REDIS}
REDISLOCK_ADMIN_STOCKS = "shop.panel.live_stocks"
MIDDLEWARE = ["bench.admin_walk_settings.ServerTiming", *MIDDLEWARE]


class ServerTiming:
    """``Server-Timing: app;dur=<ms>``: the time from the request's arrival to the response."""

    def __init__(self, get_response: Any) -> None:
        self.get_response = get_response

    def __call__(self, request: Any) -> Any:
        start = time.perf_counter()
        response = self.get_response(request)
        response["Server-Timing"] = f"app;dur={(time.perf_counter() - start) * 1000:.1f}"
        return response
