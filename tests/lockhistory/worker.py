"""One worker process of the history check: ``python -m tests.lockhistory.worker JSON``.

Runs seeded random lock operations on a few names until its deadline or its operation
count, and appends each step to its own history file (one JSON object a line, flushed at
once, so a stopped or killed worker loses at most a torn last line). Every exclusive hold
makes one fenced read-modify-write of its name's database row (PostgreSQL, or SQLite):
``SELECT value``, then ``UPDATE ... SET value = <read + 1>, fence = f WHERE fence < f``.

What the worker records as a hold's ``until`` is the latest deadline it has evidence for
(see :mod:`tests.lockhistory.checker`): the send time of the acquire, of a successful
``extend`` or of a successful watchdog renewal of *this object's* hold, plus the TTL that
call set; on Redlock the validity the lock computed. The watchdog's renewals are observed
by wrapping its ``_renew``/``_renewed`` (test instrumentation; Redis is real).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import sys
import time
from typing import Any

from .instrument import CountingRetry, mutate, trace_fair
from .recording import Belief, History, Rows

now = time.monotonic


class Worker:
    def __init__(self, args: dict[str, Any]) -> None:
        self.args = args
        self.rng = random.Random(args["seed"])
        self.kind = args["kind"]
        self.names = args["names"]
        self.rw_names = args.get("rw_names", [])
        self.semaphores: dict[str, int] = args.get("semaphores", {})
        self.fair_names: list[str] = args.get("fair_names", [])
        self.only: list[str] = args.get("only", [])
        if args.get("mutate"):
            mutate(args["mutate"])
        self.ttls = args["ttls"]
        self.hist = History(args["history"], args["worker"])
        self.rows = Rows(args["db"])
        self.belief = Belief(self.kind == "redlock")
        self.backend = backend_of(args)
        self.belief.watch()
        from django_redislock.exceptions import ConnectionFailed, LockError, LockLost

        self.LockLost, self.errors = LockLost, (LockError, ConnectionFailed, OSError)

    # -- one hold's record ---------------------------------------------------------------------

    def record(self, lock: Any, op: str, kind: str, invoke: float, ok: float, **kw: Any) -> dict:
        hold = lock._hold
        rec = {"ev": "hold", "op": op, "name": lock.name, "kind": kind, "fence": hold.fence}
        rec.update(invoke=invoke, ok=ok, ttl=float(lock.ttl), watchdog=bool(lock.watchdog))
        rec.update(kw)
        self.belief.track(lock, hold, rec, invoke)
        return rec

    def close(self, lock: Any, rec: dict[str, Any], hold: Any) -> None:
        """Fill in the hold's loss and stop tracking it: its release is about to be sent."""
        rec["released"] = now()
        self.belief.close(rec)
        told = self.belief.lost.get((lock.name, rec["fence"]))
        if told is not None and "lost_at" not in rec:
            rec["lost_at"] = told

    def release(self, lock: Any, rec: dict[str, Any], what: str) -> None:
        hold = lock._hold
        self.close(lock, rec, hold)
        op = rec["op"]
        self.hist.step(op, what, "invoke")
        try:
            lock.release()
            self.hist.step(op, what, "ok")
            rec["release"] = "ok"
        except self.LockLost:
            self.hist.step(op, what, "fail", error="LockLost")
            rec["release"] = "lost"
        except self.errors as exc:
            self.hist.step(op, what, "unknown", error=type(exc).__name__)
            rec["release"] = "unknown"
        self.hist.add(**rec)

    def work(self, lock: Any, rec: dict[str, Any]) -> None:
        """The critical section: maybe a fenced write, a pause, maybe extend/ensure_held."""
        if rec.get("mode", "x") == "x" and rec.get("fresh", True):
            invoke, done, accepted = self.rows.write(lock.name, rec["fence"])
            self.hist.add(
                ev="write", name=lock.name, fence=rec["fence"], invoke=invoke, done=done,
                accepted=accepted,
            )  # fmt: skip
        time.sleep(self.pause(lock))
        roll = self.rng.random()
        if roll < 0.15:
            self.extend(lock, rec)
        elif roll < 0.25:
            self.ensure(lock, rec)

    def pause(self, lock: Any) -> float:
        ttl = float(lock.ttl)
        roll = self.rng.random()
        if roll < 0.05:
            return ttl * self.rng.uniform(1.0, 1.5)  # past the TTL (a watchdog keeps it)
        if roll < 0.25:
            return ttl * self.rng.uniform(0.4, 0.9)  # most of the TTL
        return self.rng.uniform(0, 0.3 * ttl) if roll < 0.55 else self.rng.uniform(0, 0.02)

    def extend(self, lock: Any, rec: dict[str, Any], ttl: float | None = None) -> None:
        ttl = self.rng.choice(self.ttls) if ttl is None else ttl
        hold, invoke = lock._hold, now()
        self.hist.step(rec["op"], "extend", "invoke")
        try:
            lock.extend(ttl)
        except self.LockLost:
            rec.setdefault("lost_at", invoke)
            self.hist.step(rec["op"], "extend", "fail", error="LockLost")
            return
        except self.errors as exc:
            self.hist.step(rec["op"], "extend", "unknown", error=type(exc).__name__)
            return
        self.belief.extended(lock, hold, rec, invoke, ttl)
        self.hist.step(rec["op"], "extend", "ok")

    def ensure(self, lock: Any, rec: dict[str, Any]) -> None:
        invoke = now()
        self.hist.step(rec["op"], "ensure_held", "invoke")
        try:
            lock.ensure_held()
            self.hist.step(rec["op"], "ensure_held", "ok")
        except self.LockLost:
            rec.setdefault("lost_at", invoke)
            self.hist.step(rec["op"], "ensure_held", "fail", error="LockLost")
        except self.errors as exc:
            self.hist.step(rec["op"], "ensure_held", "unknown", error=type(exc).__name__)

    def acquire(self, lock: Any, op: str, what: str) -> tuple[bool, float]:
        invoke = now()
        self.hist.step(op, what, "invoke", name=lock.name)
        try:
            got = lock.acquire(timeout=self.rng.choice([0, 0.2, 1.0, 2.0]))
        except self.errors as exc:
            self.hist.step(op, what, "unknown", error=type(exc).__name__)
            return False, invoke
        self.hist.step(op, what, "ok" if got else "fail")
        return got, invoke

    # -- the operations ------------------------------------------------------------------------

    def lock_args(self) -> dict[str, Any]:
        roll = self.rng.random()
        if roll < 0.4:
            return {"ttl": self.rng.choice(self.ttls)}
        if roll < 0.7:
            return {}  # DEFAULT_TTL with the watchdog
        return {"ttl": self.rng.choice(self.ttls), "watchdog": True}

    def mutex(self) -> None:
        op = self.hist.op_id()
        lock = self.backend.lock(self.rng.choice(self.names), **self.lock_args())
        got, invoke = self.acquire(lock, op, "acquire")
        if got:
            rec = self.record(lock, op, "mutex", invoke, now(), identity=op)
            self.work(lock, rec)
            self.release(lock, rec, "release")

    def reentrant(self) -> None:
        op = self.hist.op_id()
        name = self.rng.choice(self.names)
        owner = f"job-{self.rng.randrange(3)}" if self.rng.random() < 0.3 else None
        identity = f"owner:{owner}" if owner else f"thread:{self.hist.worker}"
        outer = self.backend.lock(name, reentrant=True, owner=owner, **self.lock_args())
        got, invoke = self.acquire(outer, op, "reentrant acquire")
        if not got:
            return
        rec = self.record(outer, op, "reentrant", invoke, now(), identity=identity)
        self.work(outer, rec)
        for _level in range(self.rng.randrange(3)):
            inner = self.backend.lock(name, reentrant=True, owner=owner, **self.lock_args())
            iop = self.hist.op_id()
            got, iinvoke = self.acquire(inner, iop, "reentry")
            if not got:
                break
            irec = self.record(
                inner, iop, "reentry", iinvoke, now(), identity=identity, fresh=False
            )
            time.sleep(self.rng.uniform(0, 0.5 * float(inner.ttl)))
            if self.rng.random() < 0.3:
                self.extend(inner, irec)
            self.release(inner, irec, "reentry release")
        time.sleep(self.pause(outer))
        if owner and self.rng.random() < 0.3:
            self.ensure(outer, rec)  # a lost owner= hold, then its release (issue 23, 3)
        self.release(outer, rec, "reentrant release")

    def shortened(self) -> None:
        """An outer hold with a long explicit TTL, an inner watchdog hold or a short extend.

        The inner parts may not end the outer hold early (issue 23, 2): the outer goes on
        believing its own deadline after the inner one is released.
        """
        op = self.hist.op_id()
        name = self.rng.choice(self.names)
        identity = f"thread:{self.hist.worker}"
        outer = self.backend.lock(name, reentrant=True, ttl=max(self.ttls))
        got, invoke = self.acquire(outer, op, "reentrant acquire")
        if not got:
            return
        rec = self.record(outer, op, "reentrant", invoke, now(), identity=identity)
        self.work(outer, rec)
        inner = self.backend.lock(name, reentrant=True)  # the watchdog, DEFAULT_TTL
        iop = self.hist.op_id()
        got, iinvoke = self.acquire(inner, iop, "reentry")
        if got:
            irec = self.record(inner, iop, "reentry", iinvoke, now(), identity=identity)
            irec["fresh"] = False
            time.sleep(float(inner.ttl) * self.rng.uniform(0.4, 0.6))  # one renewal
            if self.rng.random() < 0.5:
                self.extend(inner, irec, min(self.ttls))
            self.release(inner, irec, "reentry release")
        time.sleep(max(0.0, rec["invoke"] + max(self.ttls) * 0.8 - now()))
        self.release(outer, rec, "reentrant release")

    def lost_owner(self) -> None:
        """An ``owner=`` hold that expires, ``ensure_held`` says so, then its release.

        The release of a hold known lost must not end the same owner's newer hold, taken
        meanwhile by another process (issue 23, 3).
        """
        op = self.hist.op_id()
        name = self.rng.choice(self.names)
        owner = "job-0"
        lock = self.backend.lock(name, reentrant=True, owner=owner, ttl=min(self.ttls))
        got, invoke = self.acquire(lock, op, "reentrant acquire")
        if not got:
            return
        rec = self.record(lock, op, "reentrant", invoke, now(), identity=f"owner:{owner}")
        self.work(lock, rec)
        time.sleep(max(0.0, rec["invoke"] + float(lock.ttl) * 1.3 - now()))
        self.ensure(lock, rec)
        self.release(lock, rec, "reentrant release")

    def read_write(self) -> None:
        op = self.hist.op_id()
        rw = self.backend.read_write_lock(self.rng.choice(self.rw_names))
        if self.rng.random() < 0.5:
            lock = rw.read(**self.lock_args())
            got, invoke = self.acquire(lock, op, "read")
            if got:
                rec = self.record(lock, op, "read", invoke, now(), identity=op, mode="r")
                self.work(lock, rec)
                self.release(lock, rec, "read release")
            return
        writer = rw.write(**self.lock_args())
        got, invoke = self.acquire(writer, op, "write")
        if not got:
            return
        rec = self.record(writer, op, "write", invoke, now(), identity=op)
        self.work(writer, rec)
        if self.rng.random() < 0.6:
            self.release(writer, rec, "write release")
            return
        hold = writer._hold
        self.close(writer, rec, hold)
        dinvoke = now()
        self.hist.step(op, "downgrade", "invoke")
        try:
            reader = writer.downgrade()
        except self.errors as exc:
            self.hist.step(op, "downgrade", "unknown", error=type(exc).__name__)
            self.hist.add(**rec)
            return
        self.hist.step(op, "downgrade", "ok")
        self.hist.add(**rec)
        rrec = self.record(reader, op, "downgrade", dinvoke, now(), identity=op, mode="r")
        rrec["fresh"] = False
        self.work(reader, rrec)
        self.release(reader, rrec, "read release")

    def permit(self) -> None:
        """A permit of a semaphore: never more holders than its permits (issue 30)."""
        op = self.hist.op_id()
        name = self.rng.choice(sorted(self.semaphores))
        permits = self.semaphores[name]
        permit = self.backend.semaphore(name, permits).permit(**self.lock_args())
        got, invoke = self.acquire(permit, op, "permit")
        if got:
            rec = self.record(
                permit, op, "permit", invoke, now(), identity=op, mode="p", permits=permits
            )
            self.work(permit, rec)
            self.release(permit, rec, "permit release")

    def fair(self) -> None:
        """A fair lock: granted in arrival order among live waiters (issue 30).

        Each ``fair_acquire`` call of the acquire is recorded with its send and reply times
        (a resent call from its first send to its last reply), and when the waiter left the
        queue; the checker (:class:`~tests.lockhistory.checker.FairWait`) works out arrivals
        and grants from them.
        """
        op = self.hist.op_id()
        lock = self.backend.fair_lock(self.rng.choice(self.fair_names), **self.lock_args())
        trace: dict[str, Any] = {"ev": "fair", "op": op, "name": lock.name, "tries": []}
        trace["lease"] = float(lock.wait_lease)
        trace_fair(lock, trace)
        got, invoke = self.acquire(lock, op, "fair acquire")
        trace["granted"] = got
        self.hist.add(**trace)
        if got:
            rec = self.record(lock, op, "fair", invoke, now(), identity=op)
            self.work(lock, rec)
            self.release(lock, rec, "fair release")

    def cancelled(self) -> None:
        """An asyncio acquire cancelled once, or again and again, at a random moment."""
        op = self.hist.op_id()
        lock = self.backend.lock(self.rng.choice(self.names), **self.lock_args())
        delay = self.rng.uniform(0, 0.005)
        repeat = self.rng.random() < 0.5

        state = {"acquiring": True}

        async def body() -> None:
            invoke = now()
            self.hist.step(op, "acquire_async", "invoke", name=lock.name)
            try:
                got = await lock.acquire_async(timeout=1.0)
            except asyncio.CancelledError:
                self.hist.step(op, "acquire_async", "fail", error="cancelled")
                raise
            except self.errors as exc:
                self.hist.step(op, "acquire_async", "unknown", error=type(exc).__name__)
                return
            finally:
                state["acquiring"] = False
            self.hist.step(op, "acquire_async", "ok" if got else "fail")
            if not got:
                return
            rec = self.record(lock, op, "async mutex", invoke, now(), identity=op)
            self.work(lock, rec)  # the same task: sync calls on the lock are allowed
            self.close(lock, rec, lock._hold)
            self.hist.step(op, "release_async", "invoke")
            try:
                await lock.release_async()
                self.hist.step(op, "release_async", "ok")
                rec["release"] = "ok"
            except self.LockLost:
                self.hist.step(op, "release_async", "fail", error="LockLost")
                rec["release"] = "lost"
            except self.errors as exc:
                self.hist.step(op, "release_async", "unknown", error=type(exc).__name__)
                rec["release"] = "unknown"
            self.hist.add(**rec)

        async def run() -> None:
            task = asyncio.ensure_future(body())
            await asyncio.sleep(delay)
            for _ in range(200):  # bounded: at most 200 cancellations, 0.5 ms apart
                if task.done() or not state["acquiring"]:
                    break
                task.cancel()  # only while the acquire is in flight
                if not repeat:
                    break
                await asyncio.sleep(0.0005)
            await asyncio.wait({task}, timeout=30)

        asyncio.run(run())

    def run(self) -> None:
        ops = [(self.mutex, 3), (self.cancelled, 2)]
        if self.kind != "redlock":
            ops += [(self.reentrant, 3), (self.read_write, 3)]
            ops += [(self.shortened, 2), (self.lost_owner, 2)]
            if self.semaphores:  # a Redlock alias has no semaphore
                ops += [(self.permit, 3)]
            if self.fair_names:  # nor a fair lock
                ops += [(self.fair, 3)]
        if self.only:
            ops = [(func, weight) for func, weight in ops if func.__name__ in self.only]
        funcs, weights = zip(*ops, strict=True)
        deadline = now() + self.args["seconds"]
        for _ in range(self.args["max_ops"]):
            if now() > deadline:
                break
            self.rng.choices(funcs, weights)[0]()
        self.hist.add(ev="done", t=now())


def backend_of(args: dict[str, Any]) -> Any:
    params = {"LOCATION": args["location"], "OPTIONS": dict(args["options"])}
    params["KEY_PREFIX"] = args["prefix"]
    if args.get("resend"):
        from redis.backoff import NoBackoff

        # a Retry that counts its resends, so the fair trace can mark a try resent
        params["OPTIONS"]["CLIENT_KWARGS"] = {"retry": CountingRetry(NoBackoff(), 1)}
    if args["kind"] == "cluster":
        ports = {int(k): v for k, v in args["remap"].items()}
        kwargs = params["OPTIONS"].setdefault("CLIENT_KWARGS", {})
        kwargs["address_remap"] = lambda a: (a[0], ports.get(a[1], a[1]))
    if args["kind"] == "redlock":
        from django_redislock.backends.redlock import RedlockBackend

        return RedlockBackend("history", params)
    from django_redislock.backends.redis import RedisLockBackend

    return RedisLockBackend("history", params)


def main() -> None:
    args = json.loads(sys.argv[1])
    os.environ["DJANGO_SETTINGS_MODULE"] = "tests.settings"
    import django

    django.setup()
    Worker(args).run()


if __name__ == "__main__":
    main()
