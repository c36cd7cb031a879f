"""Every id the system checks report and what it means.

Both the checks (:mod:`django_redislock.checks`) and the settings reference they point to
(:mod:`django_redislock.docs`) read this table, so it sits below both.
"""

from __future__ import annotations

#: Every id the checks report, and what it means (the settings reference lists them).
CHECKS: dict[str, str] = {
    "redislock.E001": "The setting is not a dict of alias dicts.",
    "redislock.E002": "`BACKEND` cannot be imported or is not a backend class.",
    "redislock.E003": "Unknown `OPTIONS` key (the message lists the valid keys).",
    "redislock.E004": "Bad `OPTIONS` value: non-positive TTL or timeout, wrong type.",
    "redislock.E005": "Bad `LOCATION`, or an `embedded://` path too long for a Unix socket.",
    "redislock.E006": "Unknown key in an alias dict, or a bad `KEY_PREFIX`.",
    "redislock.E007": "`OPTIONS['CLIENT_CLASS']` cannot be imported (its package is missing).",
    "redislock.E008": "Unknown or bad `OPTIONS` of a `TASKS` alias that uses `RedisTaskBackend`.",
    "redislock.E009": "A `TASKS` alias's `OPTIONS['USING']` names no `REDISLOCK_QUEUES` alias.",
    "redislock.E010": "`RedisTaskBackend` is configured but Django's tasks framework is missing "
    "(Django < 6 without the `django-tasks` backport).",
    "redislock.E011": "A check could not run (the message names the exception).",
    "redislock.E012": "A lock alias's client may resend a request later than the bucket's "
    "request memory keeps it (SOCKET_TIMEOUT x retries past 120 s).",
    "redislock.E013": "`check --deploy`: a lock server's `maxmemory-policy` is not "
    "`noeviction` (it may evict held locks and the fence counter).",
    "redislock.E020": "`REDISLOCK_TASK_MODULES` is not a list of dotted module names, or names a "
    "module that cannot be found.",
    "redislock.E021": "A `REDISLOCK_PERIODIC_TASKS` entry is malformed (the message names the "
    "entry and the key), or a `cron` schedule needs the `periodic` extra (croniter).",
    "redislock.W001": "`embedded://` while `DEBUG = False` (silent under the test runner and "
    "for paths under the temporary directory).",
    "redislock.W002": "A queue alias stores payloads with pickle.",
    "redislock.W003": "A Redlock alias lists an even number of masters (no extra safety; use 3 "
    "or 5).",
    "redislock.W004": "The metrics URLs are mounted but `prometheus_client` is missing (the "
    "`prometheus` extra); the Prometheus endpoint answers 501, the JSON one works.",
    "redislock.W005": "`check --deploy`: a lock server's `maxmemory-policy` could not be read "
    "(CONFIG refused, unreachable); `OPTIONS['EVICTION_CHECK'] = False` skips it.",
}
