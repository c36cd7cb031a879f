"""A child process for the rate limiter tests: ``python -m tests.limiter_worker JSON``.

In each of ``threads`` threads, ``rounds`` times, take ``cost`` units (the costs cycle
through ``costs``) of limit ``name`` (``rate``, ``burst``) with ``try_acquire()``; prints
one JSON line: the units admitted, the decisions made and the script calls sent to Redis
(counted by wrappers around the limiter's prepared call and the backend's ``script``).
The backend is built from explicit parameters, never from settings.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable
from typing import Any


def counting(backend: Any, calls: list[int]) -> None:
    """Count the script calls the rate limiters of ``backend`` send (one per round trip).

    A blocking take sends through the limiter's prepared call (``RateLimiter._prepared``),
    an asyncio take through the backend's ``script``: both are wrapped.
    """
    original: Callable[..., Any] = backend.script
    make: Callable[..., Any] = backend.rate_limiter

    def script(*args: Any, **kwargs: Any) -> Any:
        run = original(*args, **kwargs)

        def call(**call_kwargs: Any) -> Any:
            calls.append(1)
            return run(**call_kwargs)

        return call

    def rate_limiter(*args: Any, **kwargs: Any) -> Any:
        limit = make(*args, **kwargs)
        prepared: Callable[[Any], Any] = limit._prepared

        def counted(key: Any) -> Any:
            entry, requests = prepared(key)

            def call(call_args: Any) -> Any:
                calls.append(1)
                return entry(call_args)

            return call, requests

        limit._prepared = counted
        return limit

    backend.script = script
    backend.rate_limiter = rate_limiter


def main(args: dict[str, Any]) -> None:
    from django_redislock.backends.redis import RedisLockBackend

    params = {"LOCATION": args["location"], "OPTIONS": args.get("options", {})}
    backend = RedisLockBackend("worker", params)
    calls: list[int] = []
    counting(backend, calls)
    limit = backend.rate_limiter(args["name"], args["rate"], burst=args["burst"])
    admitted: list[int] = []
    decisions: list[int] = []
    errors: list[BaseException] = []
    costs = args["costs"]

    def run() -> None:
        try:
            for n in range(args["rounds"]):
                cost = costs[n % len(costs)]
                if limit.try_acquire(cost).admitted:
                    admitted.append(cost)
                decisions.append(1)
        except BaseException as exc:  # reported below, the test fails on it
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(args["threads"])]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    report = {"admitted": sum(admitted), "decisions": len(decisions), "calls": len(calls)}
    print(json.dumps({**report, "errors": [repr(e) for e in errors[:1]]}), flush=True)


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
