"""Child processes of the fault-injection tests: ``python -m tests.fault_worker MODE JSON``.

Every mode is bounded by a ``deadline`` (seconds) in its arguments and prints
one JSON line with what it saw, so a test can assert on it after the faults:

* ``redlock-count``: ``n`` non-atomic read-modify-writes of a counter file inside
  a Redlock lock, appending each grant's fence to a log; library errors
  (masters down, no quorum) are counted and retried;
* ``redis-load``: locks and queue operations in a loop against one server until
  a stop file appears, counting successes and exceptions by class;
* ``watchdog-hold``: take a lock without ttl (the watchdog renews it), report
  ``lock_lost`` as it fires, then after a line on stdin try a fenced write.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any


def setup(db: str | None = None) -> None:
    os.environ["DJANGO_SETTINGS_MODULE"] = "tests.settings"
    if db:
        from tests import settings

        settings.DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": db}}
    import django

    django.setup()


def redlock_count(args: dict[str, Any]) -> dict[str, Any]:
    from django_redislock.backends.redlock import RedlockBackend
    from django_redislock.exceptions import RedisLockError

    backend = RedlockBackend(
        "quorum", {"LOCATION": args["urls"], "KEY_PREFIX": "fault", "OPTIONS": args["options"]}
    )
    counter, log = Path(args["counter"]), Path(args["log"])
    deadline = time.monotonic() + args["deadline"]
    done, errors = 0, Counter[str]()
    while done < args["n"] and time.monotonic() < deadline:
        lock = backend.lock("counter", ttl=args["ttl"], timeout=5)
        try:
            if not lock.acquire():
                errors["not acquired"] += 1
                continue
        except RedisLockError as exc:
            errors[type(exc).__name__] += 1
            continue
        value = int(counter.read_text() or 0)
        time.sleep(args.get("hold", 0))  # a wider window for a second holder to show up
        counter.write_text(str(value + 1))
        with log.open("a") as out:
            out.write(f"{lock.fence}\n")
        done += 1
        try:
            lock.release()
        except RedisLockError as exc:
            errors[f"release {type(exc).__name__}"] += 1
    return {"done": done, "errors": dict(errors)}


def redis_load(args: dict[str, Any]) -> dict[str, Any]:
    """Locks and a queue against one server until ``stop`` exists; acked ids go to a file."""
    from django_redislock.backends.redis import RedisLockBackend, RedisQueueBackend

    params = {"LOCATION": args["url"], "KEY_PREFIX": "load", "OPTIONS": args.get("options", {})}
    lock_backend = RedisLockBackend("load", params)
    queue = RedisQueueBackend("load", params).queue("load")
    stop, acked_file = Path(args["stop"]), Path(args["acked"])
    deadline = time.monotonic() + args["deadline"]
    ok, errors, longest = Counter[str](), Counter[str](), 0.0
    worker = args["worker"]
    i = 0
    with acked_file.open("a") as acked:
        while not stop.exists() and time.monotonic() < deadline:
            i += 1
            started = time.monotonic()
            try:
                with lock_backend.lock(f"load:{i % 4}", ttl=1, timeout=2):
                    ok["lock"] += 1
                queue.enqueue(f"{worker}-{i}", payload={"i": i})
                for task in queue.pop(count=2, lease=30):
                    queue.ack(task)
                    acked.write(task.id + "\n")
                    acked.flush()
                    ok["ack"] += 1
            except Exception as exc:
                errors[f"{type(exc).__module__}.{type(exc).__name__}"] += 1
                time.sleep(0.05)
            longest = max(longest, time.monotonic() - started)
    return {"ok": dict(ok), "errors": dict(errors), "longest": round(longest, 3)}


def watchdog_hold(args: dict[str, Any]) -> dict[str, Any]:
    from django_redislock import signals
    from django_redislock.backends.redis import RedisLockBackend
    from django_redislock.locking import fenced_update
    from tests.testapp.models import FencedRecord

    lost: list[int] = []
    signals.lock_lost.connect(lambda sender, fence, **kw: lost.append(fence), weak=False)
    params = {
        "LOCATION": args["url"],
        "KEY_PREFIX": "test",
        "OPTIONS": {"DEFAULT_TTL": args["ttl"]},
    }
    lock = RedisLockBackend("pause", params).lock(args["name"])  # no ttl: watchdog on
    lock.acquire()
    fence = lock.fence  # what the holder's code carries around to its writes
    print(json.dumps({"fence": fence}), flush=True)
    sys.stdin.readline()  # the parent SIGSTOPs us before this line arrives
    deadline = time.monotonic() + 5
    while not lost and time.monotonic() < deadline:
        time.sleep(0.02)  # the watchdog's first renewal after SIGCONT finds the hold gone
    rows = FencedRecord.objects.filter(name=args["record"])
    applied = fenced_update(rows, fence, value="paused holder")
    return {"lost": lost, "applied": applied, "owned": lock.owned()}


MODES = {"redlock-count": redlock_count, "redis-load": redis_load, "watchdog-hold": watchdog_hold}

if __name__ == "__main__":
    mode, raw = sys.argv[1], json.loads(sys.argv[2])
    setup(raw.get("db"))
    print(json.dumps(MODES[mode](raw)), flush=True)
