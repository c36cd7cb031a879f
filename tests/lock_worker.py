"""A child process for the multi-process lock tests: ``python -m tests.lock_worker MODE JSON``.

Modes (all build their backend from explicit parameters, never from settings):

* ``count``: ``n`` non-atomic read-modify-writes of a Redis counter inside a lock
  (``kind`` mutex or write) or checks inside a read lock that the value is stable;
* ``setup-db``: create the ``FencedRecord`` table and its row in a SQLite file;
* ``pause``: take a lock, print its fence, wait for a line on stdin, then try a
  fenced write, ``ensure_held()`` and ``release()`` and print what happened;
* ``hold``: take a lock, make a fenced write, print the fence, wait for a line,
  then report whether the hold survived and release it.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any


def setup(db: str | None) -> None:
    os.environ["DJANGO_SETTINGS_MODULE"] = "tests.settings"
    if db:
        from tests import settings

        settings.DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": db}}
    import django

    django.setup()


def backend_of(args: dict[str, Any]) -> Any:
    from django_redislock.backends.redis import RedisLockBackend

    params = {"LOCATION": args["location"], "OPTIONS": args.get("options", {})}
    params["KEY_PREFIX"] = args.get("prefix", "test")
    return RedisLockBackend("worker", params)


def count(args: dict[str, Any]) -> dict[str, Any]:
    backend = backend_of(args)
    client = backend.client
    key, name, kind = args["counter"], args["name"], args.get("kind", "mutex")
    rw = backend.read_write_lock(name, ttl=10, timeout=60)
    unstable = 0
    for _ in range(args["n"]):
        if kind == "read":
            with rw.read():
                first = client.get(key)
                second = client.get(key)
                unstable += first != second
            continue
        lock = rw.write() if kind == "write" else backend.lock(name, ttl=10, timeout=60)
        with lock:
            value = int(client.get(key) or 0)
            client.set(key, value + 1)
    return {"unstable": unstable}


def setup_db(args: dict[str, Any]) -> dict[str, Any]:
    from django.db import connection

    from tests.testapp.models import FencedRecord

    with connection.schema_editor() as editor:
        editor.create_model(FencedRecord)
    FencedRecord.objects.create(name=args["record"], value="initial", fence=0)
    return {}


def pause(args: dict[str, Any]) -> dict[str, Any]:
    from django_redislock.exceptions import LockLost
    from django_redislock.locking import fenced_update
    from tests.testapp.models import FencedRecord

    lock = backend_of(args).lock(args["name"], ttl=args["ttl"])
    lock.acquire()
    print(json.dumps({"fence": lock.fence}), flush=True)
    sys.stdin.readline()  # the parent SIGSTOPs us before this line arrives
    rows = FencedRecord.objects.filter(name=args["record"])
    result: dict[str, Any] = {"applied": fenced_update(rows, lock.fence, value="paused holder")}
    for action in ("ensure_held", "release"):
        try:
            getattr(lock, action)()
            result[action] = "ok"
        except LockLost:
            result[action] = "LockLost"
    return result


def hold(args: dict[str, Any]) -> dict[str, Any]:
    from django_redislock.locking import fenced_update
    from tests.testapp.models import FencedRecord

    lock = backend_of(args).lock(args["name"], ttl=30)
    if not lock.acquire(timeout=10):
        return {"error": "not acquired"}
    rows = FencedRecord.objects.filter(name=args["record"])
    applied = fenced_update(rows, lock.fence, value="new holder")
    print(json.dumps({"fence": lock.fence, "applied": applied}), flush=True)
    sys.stdin.readline()
    owned = lock.owned()
    lock.release()
    return {"owned_after": owned}


MODES = {"count": count, "setup-db": setup_db, "pause": pause, "hold": hold}

if __name__ == "__main__":
    mode, raw = sys.argv[1], json.loads(sys.argv[2])
    setup(raw.get("db"))
    print(json.dumps(MODES[mode](raw)), flush=True)
