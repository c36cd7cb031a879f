"""Test instrumentation of the history workers: the fair lock's tries, script mutations.

:func:`trace_fair` records each ``fair_acquire`` call of one fair lock object (the checker's
:class:`~tests.lockhistory.fairorder.FairWait`); :func:`mutate` changes the Lua the worker's
process loads, so a test can show that the checker catches a broken guarantee.
"""

from __future__ import annotations

import time
from typing import Any

import redis.cluster
from redis.retry import Retry

now = time.monotonic

#: Sends redis-py's Retry made again in this process (a worker runs one call at a time).
RESENDS = [0]
#: ``EVALSHA`` sends of a cluster client in this process, first sends included: a
#: ``RedisCluster`` resends a command after a timeout or a dropped connection inside its own
#: ``execute_command`` loop (``cluster_error_retry_attempts``, 3 by default), where no
#: Retry object is called, so :class:`CountingRetry` never sees those resends.
CLUSTER_SENDS = [0]


class CountingRetry(Retry):
    """A redis-py Retry that counts its resends, so a trace can mark a try resent.

    The workers that resend (half of them) do it inside redis-py, below the lock's own
    ``_resolve``: without this count such a try would look like one plain send.
    """

    def call_with_retry(self, do: Any, fail: Any, *args: Any, **kwargs: Any) -> Any:
        def failed(*fail_args: Any) -> Any:
            RESENDS[0] += 1
            return fail(*fail_args)

        return super().call_with_retry(do, failed, *args, **kwargs)


def count_cluster_sends(client: Any) -> None:
    """Count the ``EVALSHA`` sends of ``client`` in :data:`CLUSTER_SENDS` (a cluster client only).

    Each send of the cluster client's loop goes to one node through ``_execute_command``;
    wrapping it on this one object counts the first send and every resend alike.
    """
    if not isinstance(client, redis.cluster.RedisCluster) or vars(client).get("_sends_counted"):
        return
    send = client._execute_command

    def counted(node: Any, *args: Any, **kwargs: Any) -> Any:
        if args and args[0] == "EVALSHA":
            CLUSTER_SENDS[0] += 1
        return send(node, *args, **kwargs)

    vars(client).update(_execute_command=counted, _sends_counted=True)


def trace_fair(lock: Any, trace: dict[str, Any]) -> None:
    """Record each ``fair_acquire`` call of ``lock`` (wrapping this object's own methods).

    A call whose reply was lost is resent by ``_resolve``, by redis-py's Retry
    (:class:`CountingRetry`) or by a cluster client's own loop (:func:`count_cluster_sends`:
    a try with more than one ``EVALSHA`` send, a reload after ``NOSCRIPT`` included, counts
    as resent, which only ever makes the check less strict). The resends are part of the
    same try, which spans from the first send to the last reply (or to the take-back when
    Redis stayed away: code -1), and is marked resent. ``_leave`` is the take-back and the
    leave of a waiter that stops. ``owner`` is the call's owner token, to find it in a server log.
    """
    call, resolve, leave = lock._call, lock._resolve, lock._leave
    count_cluster_sends(lock.backend.client)
    state: dict[str, Any] = {"start": 0.0, "resolving": False}

    def add(start: float, result: Any, resent: bool = False) -> None:
        code = int(result[0])
        place = int(result[2]) if code == 0 and len(result) > 2 else 0
        trace["tries"].append([start, now(), code, place, int(resent)])

    def _call(c: Any) -> Any:
        if c[0] != "fair_acquire" or state["resolving"]:
            return call(c)
        state["start"] = start = now()
        trace["owner"] = c[2][0]
        resends, sends = RESENDS[0], CLUSTER_SENDS[0]
        result = call(c)  # a ConnectionFailed goes to _resolve, which records the try
        add(start, result, resent=RESENDS[0] != resends or CLUSTER_SENDS[0] - sends > 1)
        return result

    def _resolve(c: Any, owner: str, exc: Exception) -> Any:
        state["resolving"] = True
        try:
            result = resolve(c, owner, exc)
        except BaseException:
            trace["tries"].append([state["start"], now(), -1, 0, 1])
            raise
        finally:
            state["resolving"] = False
        add(state["start"], result, resent=True)
        return result

    def _leave(owner: str) -> None:
        trace.setdefault("leave", now())
        leave(owner)

    lock._call, lock._resolve, lock._leave = _call, _resolve, _leave


#: Source changes that break a guarantee, to show the checker catches it (tests only).
MUTATIONS = {
    # the fair lock grants the last waiter first
    "fair-lifo": {
        "fair_acquire": [("ZRANGE', KEYS[4], 0, 0)", "ZRANGE', KEYS[4], -1, -1)")],
        "fair_release": [("ZRANGE', KEYS[2], 0, 0)", "ZRANGE', KEYS[2], -1, -1)")],
    },
}


def mutate(name: str) -> None:
    """Apply mutation ``name`` to the scripts this process loads."""
    from django_redislock.calls import script

    changes, original = MUTATIONS[name], vars(script)["source"]

    def source(script_name: str) -> str:
        text = original(script_name)
        for old, new in changes.get(script_name, []):
            assert old in text, (script_name, old)
            text = text.replace(old, new)
        return text

    vars(script)["source"] = source  # what Script() reads the Lua text with
