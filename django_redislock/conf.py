"""Setting names, defaults and the option schema of every backend.

Each option names its check, a problem function of :mod:`django_redislock.validation`
(the one family of value checks); ``MAX_SECONDS`` is re-exported from there.

Nothing here reads ``django.conf.settings`` at import time: the handlers read
the settings the first time an alias is used, and a ``setting_changed``
receiver (see :mod:`django_redislock.signals`) resets them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from . import validation
from .exceptions import InvalidArgument
from .validation import (
    boolean,
    check_limits,
    drift_factor,
    mapping,
    non_empty_string,
    non_negative_int,
    non_negative_seconds,
    one_of,
    optional_dotted_path,
    optional_positive_int,
    optional_positive_seconds,
    positive_int,
    positive_seconds,
    sentinel_list,
)

LOCKS_SETTING = "REDISLOCK_LOCKS"
QUEUES_SETTING = "REDISLOCK_QUEUES"
DEFAULT_ALIAS = "default"
DEFAULT_LOCATION = "redis://127.0.0.1:6379/0"
DEFAULT_KEY_PREFIX = "redislock"

DEFAULT_LOCK_BACKEND = "django_redislock.backends.redis.RedisLockBackend"
DEFAULT_QUEUE_BACKEND = "django_redislock.backends.redis.RedisQueueBackend"

#: Longest TTL or timeout accepted anywhere, in seconds (see the validation module).
MAX_SECONDS = validation.MAX_SECONDS


@dataclass(frozen=True)
class Option:
    """One key of a backend's ``OPTIONS``: its default and how to check a value."""

    default: Any
    check: Callable[[Any], str | None]
    doc: str


#: Options every Redis-backed alias accepts: how to build the client.
CONNECTION_OPTIONS: dict[str, Option] = {
    "CLIENT_CLASS": Option(
        None,
        optional_dotted_path,
        "A redis.Redis-compatible class to build the client from, e.g. "
        "'fakeredis.FakeRedis' for unit tests of user code.",
    ),
    "CLIENT_KWARGS": Option(
        {},
        mapping,
        "Extra keyword arguments for the client or pool (password, ssl_ca_certs, ...). Without "
        "a driver_info (or lib_name/lib_version) here, the app gives redis-py >= 8.1 its own "
        "version once, so a new connection does not read it from the package metadata.",
    ),
    "SOCKET_TIMEOUT": Option(
        5.0,
        positive_seconds,
        "Seconds a command may wait for a reply. Blocking reads of this app always stay below it.",
    ),
    "SOCKET_CONNECT_TIMEOUT": Option(2.0, positive_seconds, "Seconds to wait for a TCP connect."),
    "MAX_CONNECTIONS": Option(
        None, optional_positive_int, "Pool size limit per process (None: redis-py's default)."
    ),
    "HEALTH_CHECK_INTERVAL": Option(
        30, positive_int, "Seconds between PINGs on idle pooled connections."
    ),
    "DIRECT_SENDER": Option(
        True,
        boolean,
        "Send the hot lock, enqueue and rate limiter calls straight on a pooled connection "
        "(EVALSHA packed once) instead of through redis-py's execute_command; used only with "
        "a plain redis.Redis on a standard pool (see docs/calls.md). False: every call goes "
        "through redis-py's wrapper.",
    ),
    "CLUSTER": Option(
        False, boolean, "Connect with RedisCluster; LOCATION names one or more startup nodes."
    ),
    "SENTINELS": Option(
        None,
        sentinel_list,
        "Sentinel addresses; LOCATION's host is then the "
        "monitored service name, e.g. redis://mymaster/0.",
    ),
    "SENTINEL_KWARGS": Option(
        {},
        mapping,
        "Keyword arguments for the connections to the sentinels themselves (password, ...).",
    ),
}

#: Options of the Redis lock backend, besides the connection options.
LOCK_OPTIONS: dict[str, Option] = {
    "DEFAULT_TTL": Option(30.0, positive_seconds, "TTL of a lock taken without ttl=."),
    "DEFAULT_TIMEOUT": Option(
        10.0, non_negative_seconds, "Seconds `with lock:` waits before raising LockNotAcquired."
    ),
    "LOCK_INDEX_BUCKETS": Option(
        16,
        positive_int,
        "Buckets of the admin index of held locks. Each lock's keys share the hash tag of its "
        "bucket, so on a cluster this is also how many slots the locks spread over. Listing "
        "costs one script per bucket. Changing it moves names to other fence counters: only "
        "change it while no lock is held.",
    ),
    "MIN_REPLICAS_ACK": Option(
        0,
        non_negative_int,
        "Replicas that must acknowledge a grant (WAIT) before acquire() returns; 0 waits for "
        "none. A grant that only the master knows is lost if the master fails before it "
        "replicates, and the promoted replica hands the lock out again.",
    ),
    "REPLICA_ACK_TIMEOUT": Option(
        0.1,
        positive_seconds,
        "Longest wait for MIN_REPLICAS_ACK acknowledgements of one grant.",
    ),
    "EVICTION_CHECK": Option(
        True,
        boolean,
        "Let `manage.py check --deploy` read the server's maxmemory-policy (CONFIG GET, 2 s "
        "timeout) and report an evicting one (redislock.E013). False: skip it, e.g. where "
        "CONFIG is refused (a managed Redis); the policy must then be noeviction all the same.",
    ),
    "ON_REPLICA_TIMEOUT": Option(
        "fail",
        one_of("fail", "proceed"),
        "When fewer replicas acknowledged in time: 'fail' releases the grant and raises "
        "ReplicaAckTimeout (fail closed); 'proceed' keeps it and logs a warning (fail open).",
    ),
}

#: Options of the Redlock (quorum) backend, besides DEFAULT_TTL, DEFAULT_TIMEOUT and
#: LOCK_INDEX_BUCKETS, which mean what they mean for the Redis lock backend.
REDLOCK_OPTIONS: dict[str, Option] = {
    "MAX_TTL": Option(
        60.0,
        positive_seconds,
        "Longest ttl a lock of this alias may have. It is also how long a master whose run id "
        "changed (a restart: it may have forgotten holds) is left out of the quorum.",
    ),
    "CLOCK_DRIFT_FACTOR": Option(
        0.01,
        drift_factor,
        "Share of the ttl subtracted from the validity of a grant for clock drift between "
        "masters (plus 2 ms), as in the Redlock algorithm.",
    ),
    "MASTER_TIMEOUT": Option(
        0.25,
        positive_seconds,
        "Seconds one master may take to answer (socket and connect timeout). Keep it far "
        "below the ttl: a dead master must not eat the validity of a grant.",
    ),
    "RETRY_DELAY": Option(
        0.1,
        positive_seconds,
        "Longest pause before retrying when no quorum was reachable (there is no release to "
        "wait for then); the actual pause is random between a fifth of it and all of it.",
    ),
    "QUARANTINE_FRESH_MASTERS": Option(
        True,
        boolean,
        "Also leave out a master that this process sees for the first time with an uptime "
        "below MAX_TTL (it may have restarted just before). Turn off only when masters "
        "persist with appendfsync always, or in tests.",
    ),
}

#: Options of the Redis queue backend, besides the connection options.
QUEUE_OPTIONS: dict[str, Option] = {
    "VISIBILITY_TIMEOUT": Option(
        60.0,
        positive_seconds,
        "Default lease of a popped task; after it the task is handed out again.",
    ),
    "MAX_ATTEMPTS": Option(
        5, positive_int, "Runs of a task before it goes to the dead-letter set."
    ),
    "MAX_PAYLOAD_BYTES": Option(
        1024 * 1024,
        positive_int,
        "Largest serialized payload accepted by enqueue; bigger ones raise InvalidArgument.",
    ),
    "SERIALIZER": Option(
        "json",
        one_of("json", "pickle"),
        "How payloads are stored: 'json' (DjangoJSONEncoder) or 'pickle' (opt-in; check W002).",
    ),
    "COMMIT_MODE": Option(
        "on_commit",
        one_of("on_commit", "immediate"),
        "@task enqueues inside transaction.atomic() wait for the commit ('on_commit') or not.",
    ),
    "EAGER": Option(False, boolean, "@task calls run inline instead of being queued (for tests)."),
    "RETRY_BACKOFF": Option(
        1.0, positive_seconds, "First retry delay; it doubles per attempt (with jitter)."
    ),
    "RETRY_BACKOFF_MAX": Option(3600.0, positive_seconds, "Longest retry delay."),
    "RETRY_JITTER": Option(
        True, boolean, "Randomise retry delays between half and all of the backoff."
    ),
    "RECOVERY_BATCH": Option(
        100,
        positive_int,
        "Expired leases that one pop returns to the ready set (bounds the work per pop).",
    ),
    "STORE_RESULTS": Option(
        False,
        boolean,
        "Default of @task(store_result=...): keep return values for the handle delay() "
        "returns (one more round trip per such task in the worker).",
    ),
    "RESULT_TTL": Option(
        24 * 3600.0,
        positive_seconds,
        "Default of @task(result_ttl=...): seconds a stored result is kept.",
    ),
    "WORKER_GIVE_UP": Option(
        300.0,
        positive_seconds,
        "Seconds a drain_queue worker keeps reconnecting to an unreachable Redis before it "
        "exits (drain_queue --give-up overrides it).",
    ),
    "WORKER_POOL": Option(
        "solo",
        one_of("solo", "thread", "async"),
        "How drain_queue runs tasks: 'solo' (one at a time in the main thread), 'thread' "
        "(WORKER_CONCURRENCY threads) or 'async' (one event loop, WORKER_CONCURRENCY tasks in "
        "flight); drain_queue --pool overrides it.",
    ),
    "WORKER_CONCURRENCY": Option(
        None,
        optional_positive_int,
        "Tasks run at once by a thread or async pool (None: 8; solo runs 1); "
        "drain_queue --concurrency overrides it.",
    ),
    "TASK_TIME_LIMIT": Option(
        None,
        optional_positive_seconds,
        "Hard time limit (seconds) of a run of a task without its own time_limit: the run is "
        "ended and recorded as a failed attempt (TimeLimitExceeded). None: no limit.",
    ),
    "TASK_SOFT_TIME_LIMIT": Option(
        None,
        optional_positive_seconds,
        "Soft time limit (seconds): SoftTimeLimitExceeded is raised inside the run, which may "
        "catch it to clean up. Must be below TASK_TIME_LIMIT; without one, below "
        "VISIBILITY_TIMEOUT. None: no limit.",
    ),
    "WORKER_MAX_TASKS_PER_CHILD": Option(
        None,
        optional_positive_int,
        "drain_queue --pool process replaces a child after it ran this many tasks (None: "
        "never; --max-tasks-per-child overrides it).",
    ),
    "WORKER_MAX_MEMORY_PER_CHILD": Option(
        None,
        optional_positive_int,
        "drain_queue --pool process replaces a child, between two tasks, once its resident "
        "memory passes this many megabytes (None: never; --max-memory-per-child overrides it).",
    ),
    "WORKER_HEARTBEAT": Option(
        5.0,
        positive_seconds,
        "Seconds between two heartbeats of a drain_queue worker in the workers registry "
        "(list_workers, the admin's Workers page); its current tasks are this stale at most.",
    ),
    "WORKER_HEARTBEAT_TTL": Option(
        20.0,
        positive_seconds,
        "Seconds a worker stays listed after its last heartbeat: a worker killed without a "
        "clean stop disappears after this. Must be more than WORKER_HEARTBEAT (3x or more "
        "rides out a slow Redis).",
    ),
}


def heartbeat_errors(options: Mapping[str, Any]) -> list[str]:
    """The heartbeat TTL must outlast the interval, or live workers would blink out."""
    beat = options.get("WORKER_HEARTBEAT", QUEUE_OPTIONS["WORKER_HEARTBEAT"].default)
    ttl = options.get("WORKER_HEARTBEAT_TTL", QUEUE_OPTIONS["WORKER_HEARTBEAT_TTL"].default)
    if positive_seconds(beat) or positive_seconds(ttl) or ttl > beat:
        return []
    return [
        f"OPTIONS['WORKER_HEARTBEAT_TTL'] ({ttl!r}) must be more than "
        f"OPTIONS['WORKER_HEARTBEAT'] ({beat!r})"
    ]


def option_limit_errors(options: Mapping[str, Any]) -> list[str]:
    """What is wrong with an alias's ``TASK_TIME_LIMIT`` / ``TASK_SOFT_TIME_LIMIT`` pair."""
    names = ("OPTIONS['TASK_TIME_LIMIT']", "OPTIONS['TASK_SOFT_TIME_LIMIT']")
    try:
        check_limits(
            options.get("TASK_TIME_LIMIT"),
            options.get("TASK_SOFT_TIME_LIMIT"),
            options.get("VISIBILITY_TIMEOUT"),
            names,
        )
    except InvalidArgument as exc:
        return [str(exc).replace("the lease", "OPTIONS['VISIBILITY_TIMEOUT']")]
    return []


#: ``OPTIONS`` of a ``TASKS`` alias that uses ``django_redislock.contrib.tasks.RedisTaskBackend``.
TASK_OPTIONS: dict[str, Option] = {
    "USING": Option(
        DEFAULT_ALIAS,
        non_empty_string,
        "The REDISLOCK_QUEUES alias whose queues run the tasks.",
    ),
    "RESULT_TTL": Option(
        24 * 3600.0, positive_seconds, "Seconds a result is kept after its last change."
    ),
    "MAX_ATTEMPTS": Option(
        1,
        positive_int,
        "Runs before a failing call is FAILED and dead-lettered (Django's framework itself "
        "never retries, hence 1).",
    ),
    "LEASE": Option(
        None,
        optional_positive_seconds,
        "Seconds one run may take before it is handed out again (None: the queue alias's "
        "VISIBILITY_TIMEOUT).",
    ),
}


def unknown_option_errors(options: Mapping[str, Any], schema: Mapping[str, Option]) -> list[str]:
    """Return a message naming the unknown keys of ``options`` and the valid ones."""
    unknown = sorted(set(options) - set(schema), key=str)
    if not unknown:
        return []
    return [
        f"unknown OPTIONS key(s) {', '.join(map(repr, unknown))}; "
        f"valid keys are {', '.join(sorted(schema))}"
    ]


def option_value_errors(options: Mapping[str, Any], schema: Mapping[str, Option]) -> list[str]:
    """Return one message per known key of ``options`` whose value is wrong."""
    errors = []
    for key in sorted(set(options) & set(schema)):
        problem = schema[key].check(options[key])
        if problem:
            errors.append(f"OPTIONS[{key!r}] {problem}")
    return errors


def option_errors(options: Any, schema: Mapping[str, Option]) -> list[str]:
    """Return one message per problem in ``options`` (unknown keys and bad values)."""
    if not isinstance(options, Mapping):
        return [f"OPTIONS must be a dict, got {type(options).__name__}"]
    return unknown_option_errors(options, schema) + option_value_errors(options, schema)


def with_defaults(options: Mapping[str, Any], schema: Mapping[str, Option]) -> dict[str, Any]:
    """Return ``options`` completed with the schema's defaults."""
    return {key: options.get(key, option.default) for key, option in schema.items()}
