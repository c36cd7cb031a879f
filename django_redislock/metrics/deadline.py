"""Read Redis under a deadline of our own, shorter than the client's socket timeout.

A Redis that accepts connections but does not answer (stopped with SIGSTOP,
stuck in a long script, behind a half-open network path) costs every call
the alias's ``SOCKET_TIMEOUT`` (5 s by default), once per call. The metrics
scrape and the admin pages cannot afford that: Prometheus gives up after
10 s by default and reports nothing, not even ``backend_up 0``, and an
operator waiting 10 s for a page during an incident reloads it.

So each read runs in a daemon thread and the caller waits for it at most
``seconds``. When the deadline passes the caller gets
:class:`DeadlineExceeded` and moves on; the thread is left to finish on its
own (it ends when the socket timeout fires, and the connection it used goes
back to the pool or is dropped by redis-py). Only reads run this way, and a
read never changes Redis, so an abandoned one leaves nothing behind. Writes
(admin actions) are not cut short: the operator must learn whether they
happened, so they wait as long as the socket timeout allows.

Reads with a ``key`` (one per alias) never pile up: while an abandoned read
of that key is still waiting, the next one fails at once instead of starting
another thread, so a hung Redis holds at most one thread per alias and key.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from django.conf import settings

from ..exceptions import ConfigurationError, ConnectionFailed

T = TypeVar("T")

#: Seconds the metrics scrape waits for each alias (they are read in parallel).
METRICS_TIMEOUT_SETTING = "REDISLOCK_METRICS_TIMEOUT"
DEFAULT_METRICS_TIMEOUT = 1.0
#: Seconds one admin request (page, poll, action) may wait for Redis before it shows an error.
ADMIN_TIMEOUT_SETTING = "REDISLOCK_ADMIN_TIMEOUT"
DEFAULT_ADMIN_TIMEOUT = 2.0

_stuck: dict[str, threading.Thread] = {}
_stuck_lock = threading.Lock()


class DeadlineExceeded(ConnectionFailed):
    """Redis did not answer within the deadline; the read was abandoned (not cancelled)."""


def timeout_setting(name: str, default: float) -> float:
    """The positive number of seconds in setting ``name`` (read per call, for tests)."""
    value = getattr(settings, name, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 60:
        raise ConfigurationError(f"{name} must be a number of seconds in (0, 60], got {value!r}")
    return float(value)


def _start(key: str | None, fn: Callable[[], Any]) -> tuple[threading.Thread, dict[str, Any]]:
    if key is not None:
        with _stuck_lock:
            earlier = _stuck.get(key)
            if earlier is not None and earlier.is_alive():
                raise DeadlineExceeded(
                    f"{key}: an earlier read has not returned yet (Redis is not answering)"
                )
            _stuck.pop(key, None)
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # handed to the waiting caller, which re-raises it
            box["error"] = exc

    thread = threading.Thread(target=run, name=f"redislock-read-{key or 'page'}", daemon=True)
    thread.start()
    return thread, box


def _finish(key: str | None, thread: threading.Thread, box: dict[str, Any], seconds: float) -> Any:
    if thread.is_alive():
        if key is not None:
            with _stuck_lock:
                _stuck[key] = thread
        raise DeadlineExceeded(f"Redis did not answer within {seconds:g} s")
    if "error" in box:
        raise box["error"]
    return box["value"]


def within(seconds: float, fn: Callable[[], T], key: str | None = None) -> T:
    """``fn()``'s result, or :class:`DeadlineExceeded` once ``seconds`` have passed."""
    thread, box = _start(key, fn)
    thread.join(seconds)
    result: T = _finish(key, thread, box, seconds)
    return result


def all_within(seconds: float, jobs: Mapping[str, Callable[[], Any]]) -> dict[str, Any]:
    """Run ``jobs`` in parallel; each key maps to its result or the exception it ended with.

    The whole call returns within ``seconds`` (plus thread start-up): a job
    still running then maps to a :class:`DeadlineExceeded`.
    """
    started: dict[str, tuple[threading.Thread, dict[str, Any]]] = {}
    out: dict[str, Any] = {}
    for key, fn in jobs.items():
        try:
            started[key] = _start(key, fn)
        except DeadlineExceeded as exc:
            out[key] = exc
    end = time.monotonic() + seconds
    for key, (thread, box) in started.items():
        thread.join(max(0.0, end - time.monotonic()))
        try:
            out[key] = _finish(key, thread, box, seconds)
        except Exception as exc:
            out[key] = exc
    return {key: out[key] for key in jobs}


def metrics_timeout() -> float:
    return timeout_setting(METRICS_TIMEOUT_SETTING, DEFAULT_METRICS_TIMEOUT)


def admin_timeout() -> float:
    return timeout_setting(ADMIN_TIMEOUT_SETTING, DEFAULT_ADMIN_TIMEOUT)
