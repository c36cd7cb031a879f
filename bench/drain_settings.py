"""The settings of :mod:`bench.drain`'s worker process: the test suite's, with the bench alias.

The alias's server comes from ``BENCH_QUEUE_URL`` (set by :mod:`bench.drain` from its
arguments), so the worker process reads it the way a project's worker reads its settings,
without ``django.test.override_settings`` (importing ``django.test`` cost the worker's
start-up 30 ms that no ``drain_queue`` pays).
"""

import os

from tests.settings import *  # noqa: F403

REDISLOCK_QUEUES = {
    "bench": {"LOCATION": os.environ.get("BENCH_QUEUE_URL", UNREACHABLE), "KEY_PREFIX": "bench"}  # noqa: F405
}
