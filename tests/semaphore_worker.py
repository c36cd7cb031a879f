"""A child process for the semaphore tests: ``python -m tests.semaphore_worker MODE JSON``.

Modes (the backend is built from explicit parameters, never from settings):

* ``hold``: ``rounds`` times in each of ``threads`` threads, take a permit, count the
  holders inside (a Redis counter: INCR on entry, DECR on exit; every value seen on entry
  is pushed to ``seen``), and release; prints ``done``;
* ``die``: take a permit, print its fence and the permit's TTL, then wait to be killed.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from typing import Any


def backend_of(args: dict[str, Any]) -> Any:
    os.environ["DJANGO_SETTINGS_MODULE"] = "tests.settings"
    import django

    django.setup()
    from django_redislock.backends.redis import RedisLockBackend

    params = {"LOCATION": args["location"], "OPTIONS": args.get("options", {})}
    # no KEY_PREFIX: the default, as the test's own backend (RedisTarget.lock_backend) has
    return RedisLockBackend("worker", params)


def hold(args: dict[str, Any]) -> None:
    backend = backend_of(args)
    semaphore = backend.semaphore(args["name"], args["permits"], ttl=10, timeout=60)
    client = backend.client
    errors: list[BaseException] = []

    def run() -> None:
        try:
            for _ in range(args["rounds"]):
                with semaphore:
                    client.rpush(args["seen"], client.incr(args["inside"]))
                    time.sleep(0.002)
                    client.decr(args["inside"])
        except BaseException as exc:  # reported below, the test fails on it
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(args["threads"])]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    print("errors" if errors else "done", repr(errors[:1]), flush=True)


def die(args: dict[str, Any]) -> None:
    backend = backend_of(args)
    semaphore = backend.semaphore(args["name"], args["permits"], ttl=args["ttl"])
    permit = semaphore.acquire(timeout=30)
    assert permit is not None
    print(permit.fence, flush=True)
    time.sleep(300)  # killed by the test


if __name__ == "__main__":
    {"hold": hold, "die": die}[sys.argv[1]](json.loads(sys.argv[2]))
