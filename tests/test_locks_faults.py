"""Every lock operation with its reply lost, stalled, cut or resent, through the fault proxy.

Each case runs one operation (the *call*) on a lock backend reached through
:class:`~tests.faults.FaultProxy` proxies, with one fault armed on the call's
own script request, on the single server, the cluster and Redlock:

* ``lost``: the request reaches Redis, its reply never comes back (the
  connection stays silent until the client's socket timeout);
* ``stall``: once the call went out, nothing comes back (on that server) until
  well past the socket timeout (the command ran);
* ``cut``: the connection is reset half-way through the reply;
* ``resend``: the reply is lost with a connection reset and a client with a
  retry policy (redis-py ``Retry`` in ``CLIENT_KWARGS``; the cluster client's
  own default retries) sends the same request again.

Whatever the call returned or raised, afterwards:

* what the lock object believes (held or not, its fence, its count) is what
  Redis holds: no grant that nothing owns, no count the client does not know;
* while the object holds, nobody else gets in (mutual exclusion);
* once the object has let go, another owner acquires within TTL + a margin;
* a resend changes nothing: the call answers as if it ran once.

Cases that need the library to make its scripts resend-safe (request ids) or
to resolve an unknown outcome are marked ``xfail(strict=True)`` with what they
need; the mark goes when that lands.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
import redis

from django_redislock.exceptions import ConnectionFailed, LockLost
from django_redislock.locking.keys import bucket_of, lock_key

from .faults import Args, Fault, command_name
from .proxied import (
    PROXY_SOCKET_TIMEOUT,
    ProxiedTarget,
    cuts_only,
    no_resend_options,
    resend_options,
)

#: TTL of the holds under test: long enough that nothing expires during a case on a loaded
#: machine (a stalled call takes one socket timeout), short enough for the "within TTL" check.
TTL = 2.0
#: Slack beyond a TTL for another owner's acquire.
MARGIN = 1.5
#: How many socket timeouts a stall lasts: the call times out, then the server answers again
#: soon enough for a bounded resolution to reach it.
STALL_TIMEOUTS = 3
FAULTS = ("lost", "stall", "cut", "resend")
SCRIPT_COMMANDS = (b"EVALSHA", b"EVAL", b"EVALSHA_RO", b"EVAL_RO", b"FCALL")

pytestmark = pytest.mark.timeout(60)


def script_on(name: str) -> Callable[[Args], bool]:
    """A matcher for script calls that carry lock ``name`` (in a key or an argument)."""
    needle = name.encode()

    def match(args: Args) -> bool:
        return command_name(args) in SCRIPT_COMMANDS and any(needle in arg for arg in args)

    return match


# ---- what Redis holds ------------------------------------------------------------------


def assert_expiring(case: Case, keys: list[str]) -> None:
    """Whatever ``keys`` hold ends within the TTL: nothing renews a hold nobody owns."""
    for client in _servers_for(case.target):
        for key in keys:
            pttl = client.pttl(key)
            assert pttl == -2 or 0 < pttl <= TTL * 1000, f"{key} has PTTL {pttl}"


def _servers_for(target: ProxiedTarget) -> list[Any]:
    return [target.raw()] if target.kind != "redlock" else target.raw_clients()


def mutex_truth(target: ProxiedTarget, backend: Any, name: str) -> dict[str, Any]:
    """What Redis holds for mutex/reentrant ``name``: held (Redlock: by a quorum), fence, count."""
    key = lock_key(backend.masters[0] if target.kind == "redlock" else backend, name, "l")
    hashes = [client.hgetall(key) for client in _servers_for(target)]
    holding = [h for h in hashes if h.get(b"o")]
    quorum = len(hashes) // 2 + 1
    if len(holding) < quorum:
        return {"held": False, "some": len(holding), "fence": None, "count": 0}
    first = holding[0]
    return {
        "held": True,
        "some": len(holding),
        "fence": max(int(h[b"f"]) for h in holding),
        "count": int(first.get(b"n", 1)),
    }


def rw_truth(target: ProxiedTarget, backend: Any, name: str) -> dict[str, Any]:
    client = target.raw()
    writer = client.hgetall(lock_key(backend, name, "rw"))
    readers = client.zrange(lock_key(backend, name, "rr"), 0, -1)
    return {
        "writer": int(writer[b"f"]) if writer.get(b"o") else None,
        "readers": len(readers),
    }


# ---- the operations --------------------------------------------------------------------


@dataclass
class Case:
    """One run: the backend, the lock name, the objects the client holds, the call's outcome."""

    target: ProxiedTarget
    backend: Any
    name: str
    objects: dict[str, Any] = field(default_factory=dict)
    result: Any = None
    error: BaseException | None = None
    #: When the case started, before its first grant: every hold it made was granted later.
    started: float = field(default_factory=time.monotonic)

    def fresh(self) -> bool:
        """Whether every hold of the case is still inside its TTL.

        On a loaded machine a faulted call can take longer than the TTL to resolve (a
        socket timeout, then reading its answer back): the hold it was granted may then
        have ended on the server by its TTL while the object still counts it, as the
        docs say of a hold without a watchdog. Checks that compare the object's holds
        with Redis apply only while the case is fresh.
        """
        return time.monotonic() - self.started < TTL


class Op:
    """An operation under test: ``prepare`` (no fault), ``act`` (the faulted call), checks."""

    kinds: tuple[str, ...] = ("single", "cluster", "redlock")
    family = "mutex"

    def prepare(self, case: Case) -> None:
        raise NotImplementedError

    def act(self, case: Case) -> Any:
        raise NotImplementedError

    def succeeded(self, case: Case) -> None:
        """What a successful (resent) call must have answered."""

    # -- checks shared by the mutex family

    def consistent(self, case: Case, settled: bool) -> None:
        """What the object believes is what Redis holds.

        ``settled``: the server answered again as soon as the call ended, so an
        unknown outcome could have been resolved; otherwise (a stall) a grant the
        object does not know of may stay, but only until its TTL.
        """
        if self.family == "rw":
            self._rw_consistent(case, settled)
            return
        lock = case.objects["lock"]
        truth = mutex_truth(case.target, case.backend, case.name)
        if lock.held_by_me():
            if not case.fresh():
                return  # the hold may have ended by its TTL (see Case.fresh)
            assert truth["held"], f"the object holds but Redis shows {truth}"
            if case.target.kind != "redlock":
                assert truth["fence"] == lock.fence, f"fence {lock.fence} vs Redis {truth}"
                assert truth["count"] == lock.count, f"count {lock.count} vs Redis {truth}"
        elif settled:
            assert truth["some"] == 0, f"the object does not hold but Redis shows {truth}"
        else:
            assert_expiring(case, [lock_key(self.keyed(case), case.name, "l")])

    def keyed(self, case: Case) -> Any:
        return case.backend.masters[0] if case.target.kind == "redlock" else case.backend

    def _rw_consistent(self, case: Case, settled: bool) -> None:
        truth = rw_truth(case.target, case.backend, case.name)
        writer = case.objects.get("writer")
        readers = [r for r in case.objects.get("readers", []) if r.held_by_me()]
        writes = writer is not None and writer.held_by_me()
        if (writes or readers) and not case.fresh():
            return  # a hold may have ended by its TTL (see Case.fresh)
        if writer is not None and writes:
            assert truth["writer"] == writer.fence, f"the writer object holds; Redis: {truth}"
        if settled:
            assert truth["writer"] is None or writes, f"no writer object holds; Redis: {truth}"
            assert truth["readers"] == len(readers), f"{len(readers)} read holds; Redis: {truth}"
        else:
            assert truth["readers"] >= len(readers), f"{len(readers)} read holds; Redis: {truth}"
            keys = [lock_key(case.backend, case.name, part) for part in ("rw", "rr")]
            assert_expiring(case, keys)

    def exclusive(self, case: Case) -> None:
        """While the object holds, another owner is refused."""
        other = self.contender(case)
        if self.holds(case):
            got = other.acquire(blocking=False)
            # after the TTL the hold may have ended on the server (see Case.fresh)
            assert not (got and case.fresh()), "another owner got in while held"
            if got:
                other.release()

    def holds(self, case: Case) -> bool:
        if self.family == "rw":
            writer = case.objects.get("writer")
            readers = case.objects.get("readers", [])
            return bool(writer is not None and writer.held_by_me()) or any(
                r.held_by_me() for r in readers
            )
        return bool(case.objects["lock"].held_by_me())

    def contender(self, case: Case) -> Any:
        if self.family == "rw":
            return case.backend.read_write_lock(case.name, ttl=TTL).write()
        return case.backend.lock(case.name, ttl=TTL)

    def let_go(self, case: Case) -> None:
        """Release whatever the object believes it holds (no fault armed any more)."""
        objects = [case.objects.get("lock"), case.objects.get("writer")]
        objects += case.objects.get("readers", [])
        for obj in objects:
            while obj is not None and obj.held_by_me():
                try:
                    obj.release()
                except LockLost:
                    break


class Acquire(Op):
    def prepare(self, case: Case) -> None:
        case.objects["lock"] = case.backend.lock(case.name, ttl=TTL)

    def act(self, case: Case) -> Any:
        return case.objects["lock"].acquire(blocking=False)

    def succeeded(self, case: Case) -> None:
        assert case.result is True, "a resent acquire of a free lock must report the grant"


class Release(Op):
    def prepare(self, case: Case) -> None:
        lock = case.objects["lock"] = case.backend.lock(case.name, ttl=TTL)
        assert lock.acquire(blocking=False)

    def act(self, case: Case) -> Any:
        return case.objects["lock"].release()


class Extend(Op):
    def prepare(self, case: Case) -> None:
        lock = case.objects["lock"] = case.backend.lock(case.name, ttl=TTL)
        assert lock.acquire(blocking=False)

    def act(self, case: Case) -> Any:
        return case.objects["lock"].extend(ttl=TTL + 1)

    def consistent(self, case: Case, settled: bool) -> None:
        super().consistent(case, settled)
        if case.error is None and case.target.kind != "redlock":
            pttl = case.target.raw().pttl(lock_key(case.backend, case.name, "l"))
            # more than the first grant can have left now: the extend moved the deadline
            # (on a loaded machine the check may come well after the extend: no fixed bound)
            left = (TTL - (time.monotonic() - case.started)) * 1000
            assert pttl > left, f"the extend reported success but PTTL is {pttl}"


class ReentrantEnter(Op):
    kinds = ("single", "cluster")

    def prepare(self, case: Case) -> None:
        lock = case.objects["lock"] = case.backend.lock(case.name, ttl=TTL, reentrant=True)
        assert lock.acquire(blocking=False)

    def act(self, case: Case) -> Any:
        return case.objects["lock"].acquire(blocking=False)

    def succeeded(self, case: Case) -> None:
        assert case.result is True and case.objects["lock"].count == 2


class ReentrantExit(Op):
    kinds = ("single", "cluster")

    def prepare(self, case: Case) -> None:
        lock = case.objects["lock"] = case.backend.lock(case.name, ttl=TTL, reentrant=True)
        assert lock.acquire(blocking=False) and lock.acquire(blocking=False)

    def act(self, case: Case) -> Any:
        return case.objects["lock"].release()

    def succeeded(self, case: Case) -> None:
        assert case.objects["lock"].count == 1


class RWOp(Op):
    kinds = ("single", "cluster")
    family = "rw"

    def rw(self, case: Case) -> Any:
        return case.backend.read_write_lock(case.name, ttl=TTL)


class Read(RWOp):
    def prepare(self, case: Case) -> None:
        case.objects["readers"] = [self.rw(case).read()]

    def act(self, case: Case) -> Any:
        return case.objects["readers"][0].acquire(blocking=False)

    def succeeded(self, case: Case) -> None:
        assert case.result is True


class Write(RWOp):
    def prepare(self, case: Case) -> None:
        case.objects["writer"] = self.rw(case).write()

    def act(self, case: Case) -> Any:
        return case.objects["writer"].acquire(blocking=False)

    def succeeded(self, case: Case) -> None:
        assert case.result is True


class ReadRelease(RWOp):
    def prepare(self, case: Case) -> None:
        reader = self.rw(case).read()
        assert reader.acquire(blocking=False)
        case.objects["readers"] = [reader]

    def act(self, case: Case) -> Any:
        return case.objects["readers"][0].release()


class WriteRelease(RWOp):
    def prepare(self, case: Case) -> None:
        writer = self.rw(case).write()
        assert writer.acquire(blocking=False)
        case.objects["writer"] = writer

    def act(self, case: Case) -> Any:
        return case.objects["writer"].release()


class Downgrade(RWOp):
    def prepare(self, case: Case) -> None:
        writer = self.rw(case).write()
        assert writer.acquire(blocking=False)
        case.objects["writer"] = writer
        case.objects["readers"] = []

    def act(self, case: Case) -> Any:
        reader = case.objects["writer"].downgrade()
        case.objects["readers"].append(reader)
        return reader

    def succeeded(self, case: Case) -> None:
        assert case.objects["readers"] and case.objects["readers"][0].held_by_me()


OPS: dict[str, Op] = {
    "acquire": Acquire(),
    "release": Release(),
    "extend": Extend(),
    "reentrant_enter": ReentrantEnter(),
    "reentrant_exit": ReentrantExit(),
    "read": Read(),
    "write": Write(),
    "read_release": ReadRelease(),
    "write_release": WriteRelease(),
    "downgrade": Downgrade(),
}

# ---- what is known not to hold yet ----------------------------------------------------

#: (op, fault, kind) -> why it fails today.
KNOWN: dict[tuple[str, str, str], str] = {}


def known(op: str, faults: str, kinds: str, reason: str) -> None:
    for fault in faults.split():
        for kind in kinds.split():
            KNOWN[(op, fault, kind)] = reason


def params() -> list[Any]:
    out = []
    for op_name, op in OPS.items():
        for kind in op.kinds:
            for fault in FAULTS:
                reason = KNOWN.get((op_name, fault, kind))
                marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
                out.append(
                    pytest.param(kind, op_name, fault, marks=marks, id=f"{kind}-{op_name}-{fault}")
                )
    return out


# ---- the runner ------------------------------------------------------------------------


def arm(target: ProxiedTarget, fault: str, name: str) -> list[Fault]:
    match = script_on(name)
    if fault == "lost":
        return target.drop_reply(match, then="silent")
    if fault == "cut":
        return target.cut_mid_reply(match)
    if fault == "resend":
        return target.drop_reply(match, then="cut")
    return target.stall_on(PROXY_SOCKET_TIMEOUT * STALL_TIMEOUTS, match)


def neighbour(backend: Any, name: str) -> str:
    """Another lock name in the same index bucket as ``name`` (same hash tag, same slot)."""
    buckets = backend.options["LOCK_INDEX_BUCKETS"]
    for i in range(100_000):
        other = f"{name}-warm{i}"
        if bucket_of(other, buckets) == bucket_of(name, buckets):
            return other
    raise AssertionError("no neighbour name found")


def run_case(target: ProxiedTarget, op_name: str, fault: str) -> Case:
    op = OPS[op_name]
    options = resend_options(target.kind) if fault == "resend" else no_resend_options(target.kind)
    if fault in ("cut", "resend"):  # the connection is reset: no call waits for a timeout
        options.update(cuts_only(target.kind))
    backend = target.lock_backend(**options)
    name = f"flt-{op_name}-{uuid.uuid4().hex[:8]}"
    # The same operation on a name of the same bucket (so the same cluster slot), without a
    # fault: scripts loaded and connections open, so the fault meets the call itself and not
    # a NOSCRIPT round or a connection handshake.
    warm = Case(target, backend, neighbour(backend, name))
    op.prepare(warm)
    op.act(warm)
    op.let_go(warm)
    case = Case(target, backend, name)
    op.prepare(case)
    before = target.count(script_on(case.name))
    faults = arm(target, fault, case.name)
    try:
        case.result = op.act(case)
    except (ConnectionFailed, LockLost, redis.RedisClusterException) as exc:
        # RedisClusterException: a cluster client whose every node timed out while it
        # re-read the slots; see test_an_unreachable_cluster_raises_connection_failed
        case.error = exc
    finally:
        target.clear()
    assert any(f.fired.is_set() for f in faults), "the fault never met the call"
    assert target.count(script_on(case.name)) > before, "the call never reached Redis"
    if fault == "resend":
        assert case.error is None, f"a resent call failed: {case.error!r}"
        op.succeeded(case)
    return case


@pytest.mark.parametrize(("kind", "op_name", "fault"), params())
def test_lock_operation_under_fault(
    kind: str, op_name: str, fault: str, request: pytest.FixtureRequest
) -> None:
    run_checks(request.getfixturevalue(f"proxied_{kind}"), op_name, fault)


def run_checks(target: ProxiedTarget, op_name: str, fault: str) -> None:
    """One case, then every check: consistency, exclusion, another owner gets in."""
    op = OPS[op_name]
    case = run_case(target, op_name, fault)
    op.consistent(case, settled=fault != "stall")
    op.exclusive(case)
    op.let_go(case)
    other = op.contender(case)
    # the acquire's own deadline is the bound (no stopwatch around it: on a loaded machine
    # the call returns a while after its grant)
    assert other.acquire(timeout=TTL + MARGIN), "another owner never got the lock"
    other.release()


def test_an_unreachable_cluster_raises_connection_failed(proxied_cluster: ProxiedTarget) -> None:
    """A cluster that stops answering before the client read its slots fails like any server."""
    backend = proxied_cluster.lock_backend(**no_resend_options("cluster"))
    # Down for longer than the acquire's bounded resolution (its resends and take-back).
    proxied_cluster.stall(30.0, "down")
    try:
        with pytest.raises(ConnectionFailed):
            backend.lock("frozen", ttl=TTL).acquire(blocking=False)
    finally:
        proxied_cluster.clear()


WATCHDOG_TTL = 1.0


@pytest.mark.parametrize("kind", ["single", "cluster", "redlock"])
def test_a_release_that_never_arrived_stops_the_watchdog(
    kind: str, request: pytest.FixtureRequest
) -> None:
    """The release request is swallowed (Redis never sees it) and the call times out: the
    watchdog must stop renewing, so the hold ends by its TTL and another owner gets in."""
    target: ProxiedTarget = request.getfixturevalue(f"proxied_{kind}")
    backend = target.lock_backend(**no_resend_options(kind))
    name = f"flt-watchdog-{uuid.uuid4().hex[:8]}"
    lock = backend.lock(name, ttl=WATCHDOG_TTL, watchdog=True)
    assert lock.acquire(blocking=False)
    faults = [proxy.drop_request(script_on(name)) for proxy in target.proxies]
    try:
        lock.release()  # Redlock may count unreachable masters as released within validity
    except ConnectionFailed:
        pass
    finally:
        target.clear()
    assert any(f.fired.is_set() for f in faults)
    try:
        other = backend.lock(name, ttl=WATCHDOG_TTL)
        started = time.monotonic()
        assert other.acquire(timeout=WATCHDOG_TTL + MARGIN), "the watchdog kept the hold"
        assert time.monotonic() - started < WATCHDOG_TTL + MARGIN
        other.release()
        assert not lock.held_by_me(), "the object still holds after its release"
    finally:
        if lock.held_by_me():  # do not leave a hold renewed for the rest of the session
            with contextlib.suppress(ConnectionFailed, LockLost):
                lock.release()
