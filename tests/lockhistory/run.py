"""The coordinator of the history check: servers, fault proxies, workers, faults, the check.

:func:`run` starts its own servers (a single server or Redlock masters with AOF on every
write, or a 3-master cluster) in ``directory``, puts a fault proxy before each, starts
``workers`` processes of :mod:`tests.lockhistory.worker` through the proxies, applies faults
at random moments for ``seconds``, then waits until every worker ended (bounded), one
longest TTL more, records what is left in Redis and in the database, and checks the whole
history. Everything is seeded from ``seed`` and printed, so a run can be repeated (the
interleaving, of course, differs).

``python -m tests.lockhistory.run --kind single --seconds 20`` runs it by hand;
``python3 dev.py soak locks`` and ``tests/test_lock_history.py`` call :func:`run`.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis

from ..faults import FaultProxy
from ..servers import RedisProcess, start_cluster
from .checker import Report, Violation, check, read_history
from .eviction import probe_all
from .observe import leftovers, sample_grants
from .rows import open_db, read_rows

ROOT = Path(__file__).resolve().parent.parent.parent
KINDS = ("single", "cluster", "redlock")
#: Socket timeout of the workers' clients (a stall past it is a timeout).
SOCKET_TIMEOUT = 0.5
#: TTLs the workers draw from, and the TTL of a watchdog-kept lock.
TTLS = (0.6, 1.0, 2.0)
DEFAULT_TTL = 1.0
NAMES = ("m0", "m1", "m2")
RW_NAMES = ("rw0", "rw1")
#: Semaphores and their permits (issue 30: never more holders than permits). Four workers
#: rarely hold three permits at once; one permit is a crowd they meet often.
SEMAPHORES = {"s1": 1, "s2": 2}
#: Fair locks (issue 30: grant order = arrival order among live waiters): one name, so that
#: the workers queue behind each other often.
FAIR_NAMES = ("f0",)
AOF = ("--appendonly", "yes", "--appendfsync", "always")


@dataclass
class Run:
    kind: str
    directory: Path
    seed: int
    rng: random.Random
    servers: list[RedisProcess] = field(default_factory=list)
    proxies: list[FaultProxy] = field(default_factory=list)
    workers: list[subprocess.Popen[bytes]] = field(default_factory=list)
    log: Any = None
    prefix: str = ""
    db: dict[str, Any] = field(default_factory=dict)
    stopped: set[int] = field(default_factory=set)
    timers: list[threading.Timer] = field(default_factory=list)
    pending: list[str] = field(default_factory=list)  # faults left in this round

    def fault(self, type: str, **rec: Any) -> None:
        self.log.write(json.dumps({"ev": "fault", "type": type, "t": time.monotonic(), **rec}))
        self.log.write("\n")
        self.log.flush()


# -- servers and workers ---------------------------------------------------------------------


def start_servers(run: Run) -> None:
    if run.kind == "single":
        run.servers = [RedisProcess(run.directory / "single", extra=AOF).start()]
    elif run.kind == "cluster":
        run.servers = start_cluster(run.directory / "cluster")
    else:
        run.servers = [RedisProcess(run.directory / f"m{i}", extra=AOF).start() for i in range(3)]
    run.proxies = [FaultProxy(("127.0.0.1", s.port)).start() for s in run.servers]
    if run.kind == "cluster":
        ports = {s.port: p.port for s, p in zip(run.servers, run.proxies, strict=True)}
        for proxy in run.proxies:
            proxy.port_map = ports


def worker_args(
    run: Run,
    index: int,
    seconds: float,
    max_ops: int,
    *,
    only: tuple[str, ...] = (),
    mutate: str = "",
) -> dict[str, Any]:
    urls = [proxy.url for proxy in run.proxies]
    options: dict[str, Any] = {"DEFAULT_TTL": DEFAULT_TTL}
    if run.kind == "redlock":
        # a restarted master sits out MAX_TTL: keep that short, above the longest TTL
        options.update(MASTER_TIMEOUT=SOCKET_TIMEOUT, QUARANTINE_FRESH_MASTERS=False, MAX_TTL=3.0)
    else:
        options["SOCKET_TIMEOUT"] = SOCKET_TIMEOUT
    if run.kind == "cluster":
        options["CLUSTER"] = True
    remap = {str(s.port): p.port for s, p in zip(run.servers, run.proxies, strict=True)}
    return {
        "kind": run.kind,
        "worker": f"w{index}",
        "seed": run.rng.randrange(2**32),
        "location": urls if run.kind == "redlock" else urls[0],
        "options": options,
        "prefix": run.prefix,
        "remap": remap,
        "resend": run.kind != "cluster" and index % 2 == 1,  # a redis-py Retry: resends
        "names": list(NAMES),
        "rw_names": list(RW_NAMES),
        "semaphores": {} if run.kind == "redlock" else dict(SEMAPHORES),
        "fair_names": [] if run.kind == "redlock" else list(FAIR_NAMES),
        "only": list(only),
        "mutate": mutate,
        "ttls": list(TTLS),
        "seconds": seconds,
        "max_ops": max_ops,
        "history": str(run.directory / f"w{index}.jsonl"),
        "db": run.db,
    }


def spawn(args: dict[str, Any]) -> subprocess.Popen[bytes]:
    # an outer PYTHONPATH goes first: e.g. another checkout's django_redislock to compare
    path = os.pathsep.join(filter(None, [os.environ.get("PYTHONPATH"), str(ROOT)]))
    env = {**os.environ, "PYTHONPATH": path, "PYTHONUNBUFFERED": "1"}
    err = open(Path(args["history"]).with_suffix(".err"), "wb")  # noqa: SIM115
    return subprocess.Popen(
        [sys.executable, "-m", "tests.lockhistory.worker", json.dumps(args)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=err,
    )


# -- faults ----------------------------------------------------------------------------------


def _raw(server: RedisProcess) -> redis.Redis:
    return server.client(socket_timeout=5.0)


def _sigstop(run: Run) -> bool:
    """Stop a live worker for longer than the longest TTL; a timer resumes it."""
    live = [w for w in run.workers if w.poll() is None and w.pid not in run.stopped]
    if not live:
        return False
    victim = run.rng.choice(live)
    victim.send_signal(signal.SIGSTOP)
    run.stopped.add(victim.pid)

    def resume() -> None:
        if victim.poll() is None:
            victim.send_signal(signal.SIGCONT)
        run.stopped.discard(victim.pid)

    timer = threading.Timer(max(TTLS) * run.rng.uniform(1.1, 1.6), resume)
    timer.daemon = True
    timer.start()
    run.timers.append(timer)
    return True


def _restart(server: RedisProcess, rng: random.Random) -> bool:
    server.kill()  # SIGKILL: every write was fsynced (appendfsync always)
    time.sleep(rng.uniform(0.05, 0.3))
    server.start()
    return True


def _each(servers: list[RedisProcess], command: str) -> bool:
    for server in servers:
        _raw(server).execute_command(*command.split())
    return True


#: Each fault: what it does to (run, proxy, server, times), True when it was applied.
FAULTS: dict[str, Callable[[Run, FaultProxy, RedisProcess, int], object]] = {
    "lost reply (cut)": lambda r, p, s, n: p.drop_reply(times=n, then="cut"),
    "lost reply (silent)": lambda r, p, s, n: p.drop_reply(times=n, then="silent"),
    "lost request": lambda r, p, s, n: p.drop_request(times=1),
    "stall past the timeout": lambda r, p, s, n: p.stall_on(
        SOCKET_TIMEOUT * r.rng.uniform(1.2, 2.5)
    ),
    "cut mid-reply": lambda r, p, s, n: p.cut_mid_reply(times=n),
    "cut every connection": lambda r, p, s, n: p.cut_all() or True,
    "SIGSTOP past the TTL": lambda r, p, s, n: _sigstop(r),
    "SCRIPT FLUSH": lambda r, p, s, n: _each(r.servers, "SCRIPT FLUSH"),
    "CLIENT PAUSE": lambda r, p, s, n: _each([s], f"CLIENT PAUSE {r.rng.randint(100, 700)} ALL"),
    "restart (AOF)": lambda r, p, s, n: _restart(s, r.rng),
}


def fault_names(kind: str) -> list[str]:
    """The faults a run of ``kind`` applies (a cluster is not restarted: its slots move)."""
    return [name for name in FAULTS if kind != "cluster" or name != "restart (AOF)"]


def apply_fault(run: Run) -> None:
    """The next fault of this round; each round applies every fault once, in a random order.

    Rounds rather than independent draws: a short run (the suite's) still applies every
    type, which its test checks. A fault that could not be applied (no live worker to stop,
    a server mid-restart) goes to the end of the round and is tried again.
    """
    if not run.pending:
        run.pending = fault_names(run.kind)
        run.rng.shuffle(run.pending)
    fault = run.pending.pop()
    i = run.rng.randrange(len(run.proxies))
    try:
        applied = FAULTS[fault](run, run.proxies[i], run.servers[i], run.rng.randint(1, 3))
    except BaseException:
        run.pending.insert(0, fault)
        raise
    if applied:
        run.fault(fault, proxy=i)
    else:
        run.pending.insert(0, fault)


def clear_faults(run: Run) -> None:
    for timer in run.timers:
        timer.cancel()
    for worker in run.workers:
        if worker.poll() is None:
            worker.send_signal(signal.SIGCONT)
    run.stopped.clear()
    for proxy in run.proxies:
        proxy.clear()


def finish(state: Run, seconds: float) -> None:
    """End the faults, wait for the workers (bounded), one longest TTL more, record the end."""
    clear_faults(state)
    for worker in state.workers:
        try:
            worker.wait(timeout=60 + seconds / 10)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait(timeout=10)
            state.fault("worker killed at the end (did not finish)")
    time.sleep(max(*TTLS, DEFAULT_TTL) + 0.5)
    final: dict[str, Any] = {"ev": "final", "rows": read_rows(state.db)}
    final["leftover"] = leftovers(state)
    final["exit_codes"] = [w.returncode for w in state.workers]
    state.log.write(json.dumps(final) + "\n")
    state.log.close()


def add_eviction(report: Report, directory: Path) -> None:
    """The eviction probe's findings: expected, except a server the check did not refuse."""
    report.expected += probe_all(directory)
    for label in report.expected:
        if "NOT refused" in label:
            report.violations.append(Violation("evicting server accepted", "-", label))


# -- one run ---------------------------------------------------------------------------------


def run(
    kind: str,
    seconds: float,
    *,
    seed: int | None = None,
    workers: int = 4,
    directory: Path | None = None,
    max_ops: int = 100_000,
    fault_every: tuple[float, float] = (0.15, 0.6),
    eviction: bool = False,
    only: tuple[str, ...] = (),
    mutate: str = "",
) -> tuple[Report, Path]:
    """Run the check on ``kind`` for ``seconds``; returns the report and the history folder.

    ``only`` limits the workers to those operations (their method names, e.g. ``fair``);
    ``mutate`` names a change to the scripts the workers load
    (:data:`tests.lockhistory.worker.MUTATIONS`), to show the checker catches it.

    With ``eviction``, the report's ``expected`` section also says what an evicting server
    did to a held lock (:mod:`.eviction`): refused by the system check, so not a violation.
    """
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, not {kind!r}")
    seed = random.randrange(2**31) if seed is None else seed
    directory = Path(directory or tempfile.mkdtemp(prefix=f"lockhist-{kind}-"))
    directory.mkdir(parents=True, exist_ok=True)
    print(f"lock history check: kind={kind} seed={seed} seconds={seconds:g} in {directory}")
    rng = random.Random(seed)
    state = Run(kind, directory, seed, rng, prefix=f"h{uuid.uuid4().hex[:6]}")
    state.log = open(directory / "coordinator.jsonl", "w")  # noqa: SIM115
    try:
        start_servers(state)
        state.db = open_db(directory, (*NAMES, *RW_NAMES, *FAIR_NAMES))
        args = [
            worker_args(state, i, seconds, max_ops, only=only, mutate=mutate)
            for i in range(workers)
        ]
        state.workers = [spawn(a) for a in args]
        deadline = time.monotonic() + seconds
        sampler = threading.Thread(
            target=sample_grants, args=(state, deadline + 5, NAMES), daemon=True
        )
        sampler.start()
        time.sleep(min(1.0, seconds / 10))  # let the workers start before the first fault
        while time.monotonic() < deadline:
            try:
                apply_fault(state)
            except (redis.RedisError, OSError, RuntimeError) as exc:  # e.g. mid-restart
                state.fault(f"fault not applied: {type(exc).__name__}")
            time.sleep(rng.uniform(*fault_every))
            if all(w.poll() is not None for w in state.workers):
                break
        finish(state, seconds)
        sampler.join(timeout=30)
        records = read_history(sorted(directory.glob("*.jsonl")))
        report = check(records)
        report.seed = seed
        if eviction:
            add_eviction(report, directory / "eviction")
        for i, worker in enumerate(state.workers):
            if worker.returncode != 0:
                report.faults[f"worker w{i} exited {worker.returncode}"] += 1
        return report, directory
    finally:
        clear_faults(state)
        for worker in state.workers:
            if worker.poll() is None:
                worker.kill()
                worker.wait(timeout=10)
        for proxy in state.proxies:
            proxy.close()
        for server in state.servers:
            server.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kind", default="all", choices=[*KINDS, "all"])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--workers", type=int, default=4)
    options = parser.parse_args(argv)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
    import django

    django.setup()
    kinds = KINDS if options.kind == "all" else (options.kind,)
    seed = random.randrange(2**31) if options.seed is None else options.seed
    failed = 0
    for kind in kinds:
        report, where = run(
            kind, options.seconds, seed=seed, workers=options.workers, eviction=kind == kinds[0]
        )
        print(f"\n== {kind} (seed {seed}, history in {where})")
        print(report.table())
        failed += len(report.violations)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
