"""A child process for the fair-lock and latch tests: ``python -m tests.fair_worker MODE JSON``.

Modes (the backend comes from explicit parameters, as in ``tests.lock_worker``):

* ``fair``: wait for fair lock ``name``; while holding it, check nobody else is inside
  (``inside`` counter), append ``id`` to the ``order`` list, hold ``hold`` seconds, release;
* ``count-down``: count latch ``name`` (of ``count``) down once;
* ``latch-wait``: wait for latch ``name`` and append ``id`` to ``order`` once it opened.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.lock_worker import backend_of, setup

ROOT = Path(__file__).resolve().parent.parent


def fair(args: dict[str, Any]) -> dict[str, Any]:
    backend = backend_of(args)
    client = backend.client
    lock = backend.fair_lock(args["name"], ttl=10, timeout=60, wait_lease=args.get("lease", 2.0))
    if not lock.acquire():
        return {"error": "not acquired"}
    fence = lock.fence
    overlap = int(client.incr(args["inside"])) != 1
    client.rpush(args["order"], args["id"])
    time.sleep(args.get("hold", 0.0))
    client.decr(args["inside"])
    lock.release()
    return {"overlap": overlap, "fence": fence}


def count_down(args: dict[str, Any]) -> dict[str, Any]:
    return {"left": backend_of(args).latch(args["name"], count=args["count"]).count_down()}


def latch_wait(args: dict[str, Any]) -> dict[str, Any]:
    latch = backend_of(args).latch(args["name"], count=args["count"])
    opened = latch.wait(timeout=60)
    backend_of(args).client.rpush(args["order"], args["id"])
    return {"opened": opened}


MODES = {"fair": fair, "count-down": count_down, "latch-wait": latch_wait}


def start(mode: str, target: Any, **args: Any) -> subprocess.Popen[str]:
    """Run this module as a child in ``mode`` against ``target`` (a tests ``RedisTarget``)."""
    params = {"location": target.location, "options": target.options, **args}
    return subprocess.Popen(
        [sys.executable, "-m", "tests.fair_worker", mode, json.dumps(params)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )


def finish(process: subprocess.Popen[str], timeout: float = 90) -> dict[str, Any]:
    """The child's last line (its JSON result), once it exited 0."""
    out, _ = process.communicate(timeout=timeout)
    assert process.returncode == 0, out
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return result


if __name__ == "__main__":
    mode, raw = sys.argv[1], json.loads(sys.argv[2])
    setup(None)
    print(json.dumps(MODES[mode](raw)), flush=True)
