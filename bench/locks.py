"""Lock benchmark: django-redislock beside the raw 2-round-trip floor and the libraries users pick.

In one run, on one private server:

* uncontended acquire+release cycles/s and round trips per cycle (counted at the
  client: every ``send_packed_command`` of redis-py is one request);
* wake-up latency of a blocked waiter after a release and after an expiry (p50/p99);
* contended critical sections/s with 8 threads and with 4 processes, the wait
  per acquire (p50/p99) and fairness (fewest / most sections done by one worker).

Peers: raw ``SET NX PX`` + ``EVALSHA`` compare-and-delete (the floor), redis-py's
``Lock``, python-redis-lock and pottery's ``Redlock`` on a single master.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
import uuid
from typing import Any

import redis

from bench.common import (
    LoadAverage,
    interleaved,
    median,
    percentile,
    reply_parser,
    round_trips,
    save,
    spread,
    table,
)

RELEASE_LUA = (
    "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0"
)
LIBRARIES = [
    "django-redislock",
    "raw SET NX + EVALSHA",
    "redis-py Lock",
    "python-redis-lock",
    "pottery Redlock",
]
WAITING = ["django-redislock", "redis-py Lock", "python-redis-lock", "pottery Redlock"]


class Adapter:
    """One library's lock behind one interface: make, acquire, release."""

    def __init__(self, library: str, url: str) -> None:
        self.library = library
        self.url = url
        self.client = redis.Redis.from_url(url, socket_timeout=60)
        self.backend: Any = None
        if library == "django-redislock":
            from django_redislock.backends.redis import RedisLockBackend

            self.backend = RedisLockBackend("bench", {"LOCATION": url, "KEY_PREFIX": "bench"})
        self.release_script = self.client.register_script(RELEASE_LUA)

    def make(self, name: str, ttl: float) -> Any:
        if self.library == "django-redislock":
            return self.backend.lock(name, ttl=ttl, timeout=30)
        if self.library == "raw SET NX + EVALSHA":
            return [name, ttl, None]
        if self.library == "redis-py Lock":
            return self.client.lock(name, timeout=ttl, blocking_timeout=30)
        if self.library == "python-redis-lock":
            import redis_lock

            return redis_lock.Lock(self.client, name, expire=max(1, round(ttl)))
        from pottery import Redlock

        return Redlock(key=name, masters={self.client}, auto_release_time=ttl)

    def acquire(self, lock: Any, blocking: bool = True) -> bool:
        if self.library == "django-redislock":
            return bool(lock.acquire(blocking=blocking, timeout=30))
        if self.library == "raw SET NX + EVALSHA":
            lock[2] = uuid.uuid4().hex
            return bool(self.client.set(lock[0], lock[2], nx=True, px=int(lock[1] * 1000)))
        if self.library == "python-redis-lock":
            return bool(lock.acquire(blocking=blocking))  # blocks in BLPOPs of `expire` s
        if self.library == "pottery Redlock":
            return bool(lock.acquire(blocking=blocking, timeout=30 if blocking else -1))
        return bool(lock.acquire(blocking=blocking))

    def release(self, lock: Any) -> None:
        if self.library == "raw SET NX + EVALSHA":
            self.release_script(keys=[lock[0]], args=[lock[2]])
        else:
            lock.release()


def cycle_of(adapter: Adapter) -> Any:
    """One uncontended acquire + release of ``adapter``'s library, as a callable."""
    lock = adapter.make(f"u:{adapter.library}", 10)

    def cycle() -> None:
        if not adapter.acquire(lock, blocking=False):
            raise RuntimeError(f"{adapter.library}: uncontended acquire failed")
        adapter.release(lock)

    return cycle


def uncontended(
    adapters: list[Adapter], seconds: float, rounds: int
) -> tuple[dict[str, dict[str, Any]], list[dict[str, float]]]:
    """Cycles/s per library (median of ``rounds`` interleaved rounds) and every round's rates."""
    cycles = {a.library: cycle_of(a) for a in adapters}
    found: dict[str, dict[str, Any]] = {}
    for library, cycle in cycles.items():
        for _ in range(200):
            cycle()
        with round_trips() as sent:
            for _ in range(500):
                cycle()
        found[library] = {"round trips/cycle": sent[0] / 500}
    per_round = interleaved(cycles, seconds=seconds, rounds=rounds)
    for library in cycles:
        found[library]["cycles/s"] = median(r[library] for r in per_round)
    return found, per_round


#: The ways users write a lock, measured side by side (``idioms``): what each row does.
IDIOMS = {
    "raw SET NX + EVALSHA (floor)": "SET NX PX, then an EVALSHA compare-and-delete",
    "redis-py: reused Lock object": "one r.lock(name, timeout=10) object, acquire + release",
    "redis-py: with r.lock(name)": "with r.lock(name, timeout=10): a new object per call",
    "ours: reused lock object": "one locks[alias].lock(name, ttl=10) object, with lock:",
    "ours: README idiom": 'with locks["default"].lock(name, ttl=10): a new object per call',
    "ours: default lock (watchdog)": 'with locks["default"].lock(name): no ttl, watchdog on',
    "ours: @distributed_lock view": "@distributed_lock(name) on a function (default lock)",
    "ours: @distributed_lock(ttl=10)": "@distributed_lock(name, ttl=10) on a function",
}


def idioms(url: str, seconds: float, rounds: int) -> dict[str, Any]:
    """Cycles/s of the idioms of :data:`IDIOMS`, interleaved, as ratios to the raw floor."""
    from django.test import override_settings

    from django_redislock import distributed_lock
    from django_redislock.handlers import locks

    client = redis.Redis.from_url(url, socket_timeout=60)
    release = client.register_script(RELEASE_LUA)
    with override_settings(REDISLOCK_LOCKS={"default": {"LOCATION": url, "KEY_PREFIX": "bi"}}):
        reused = locks["default"].lock("i:reused", ttl=10)
        theirs = client.lock("i:redis-py-reused", timeout=10)

        def raw() -> None:
            token = uuid.uuid4().hex
            client.set("i:raw", token, nx=True, px=10_000)
            release(keys=["i:raw"], args=[token])

        def redis_py_reused() -> None:
            with theirs:
                pass

        def redis_py_new() -> None:
            with client.lock("i:redis-py-new", timeout=10):
                pass

        def ours_reused() -> None:
            with reused:
                pass

        def readme() -> None:
            with locks["default"].lock("i:readme", ttl=10):
                pass

        def default() -> None:
            with locks["default"].lock("i:default"):
                pass

        @distributed_lock("i:view")
        def view() -> int:
            return 1

        @distributed_lock("i:view-ttl", ttl=10)
        def view_ttl() -> int:
            return 1

        cases = dict(
            zip(
                IDIOMS,
                (raw, redis_py_reused, redis_py_new, ours_reused, readme, default, view, view_ttl),
                strict=True,
            )
        )
        for fn in cases.values():
            for _ in range(200):
                fn()
        loads = LoadAverage()
        per_round = interleaved(cases, seconds=seconds, rounds=rounds)
        loads.sample()
    floor = "raw SET NX + EVALSHA (floor)"
    rows: list[dict[str, Any]] = []
    for name, what in IDIOMS.items():
        ratios = [r[name] / r[floor] for r in per_round]
        rows.append(
            {
                "idiom": name,
                "what it runs": what,
                "cycles/s (median)": median(r[name] for r in per_round),
                "x floor (median)": median(ratios),
                "x floor (range)": f"{min(ratios):.2f}-{max(ratios):.2f}",
            }
        )
    by = {row["idiom"]: row for row in rows}
    bare = [
        r["ours: default lock (watchdog)"] / r["ours: @distributed_lock view"] for r in per_round
    ]

    def verdict(value: float, target: float, higher: bool = True) -> str:
        return "met" if (value >= target if higher else value <= target) else "NOT met"

    readme_x = float(by["ours: README idiom"]["x floor (median)"])
    default_x = float(by["ours: default lock (watchdog)"]["x floor (median)"])
    added = median(bare) - 1
    notes = [
        f"{rounds} interleaved rounds of {seconds:g} s per idiom (slices of 50 ms taking turns, "
        f"order rotated each round); ratios within a round; median and range over the rounds. "
        f"{loads.note()} (at the start and the end of the rounds).",
        f"README idiom vs the raw floor: {readme_x:.2f}x (target >= 0.95x: "
        f"{verdict(readme_x, 0.95)})",
        f"default lock (watchdog) vs the raw floor: {default_x:.2f}x (target >= 0.9x: "
        f"{verdict(default_x, 0.9)})",
        f"@distributed_lock on a view over the bare default lock: {added:+.1%} time per call "
        f"(target <= +5%: {verdict(added, 0.05, higher=False)})",
        f"Reply parser of every row (redis-py {redis.__version__}): {reply_parser()}.",
        "Reproduce: python3 dev.py bench locks (or python -m bench locks in the bench "
        "environment).",
    ]
    return {"name": "locks_idioms", "columns": list(rows[0]), "rows": rows, "notes": notes}


def wake_after_release(adapter: Adapter, samples: int) -> list[float]:
    latencies = []
    for i in range(samples):
        name = f"wr:{adapter.library}:{i}"
        holder = adapter.make(name, 10)
        assert adapter.acquire(holder, blocking=False)
        woke: list[float] = []

        def wait(name: str = name, woke: list[float] = woke) -> None:
            waiter = adapter.make(name, 10)
            adapter.acquire(waiter)
            woke.append(time.perf_counter())
            adapter.release(waiter)

        thread = threading.Thread(target=wait)
        thread.start()
        time.sleep(0.03)  # the waiter is blocked by now
        released = time.perf_counter()
        adapter.release(holder)
        thread.join(40)
        latencies.append((woke[0] - released) * 1000)
    return latencies


def wake_floor(url: str, samples: int) -> list[float]:
    """A bare ``LPUSH`` waking a ``BLPOP`` in another thread: the one-round-trip wake floor.

    A wake-up after a release is the release plus the woken waiter's acquire, so
    on the machine the run is on no push wake-up of that shape can beat this plus
    one round trip.
    """
    pusher = redis.Redis.from_url(url)
    latencies = []
    for i in range(samples):
        key = f"wake-floor:{i}"
        popped: list[float] = []

        def wait(key: str = key, popped: list[float] = popped) -> None:
            waiter = redis.Redis.from_url(url, socket_timeout=60)
            waiter.blpop([key], timeout=10)
            popped.append(time.perf_counter())
            waiter.close()

        thread = threading.Thread(target=wait)
        thread.start()
        time.sleep(0.03)  # the waiter is blocked by now
        pushed = time.perf_counter()
        pusher.lpush(key, 1)
        thread.join(40)
        latencies.append((popped[0] - pushed) * 1000)
    pusher.close()
    return latencies


def wake_after_expiry(adapter: Adapter, samples: int) -> list[float]:
    ttl = 1.0 if adapter.library == "python-redis-lock" else 0.2  # it takes whole seconds
    latencies = []
    for i in range(samples):
        name = f"we:{adapter.library}:{i}"
        holder = adapter.make(name, ttl)
        if adapter.library == "django-redislock":
            holder.watchdog = False
        assert adapter.acquire(holder, blocking=False)
        expires = time.perf_counter() + ttl
        waiter = adapter.make(name, 2)  # python-redis-lock re-checks every `expire` s
        adapter.acquire(waiter)
        latencies.append((time.perf_counter() - expires) * 1000)
        adapter.release(waiter)
    return latencies


def contend(adapter: Adapter, seconds: float, worker_id: int, start_at: float) -> dict[str, Any]:
    lock = adapter.make(f"c:{adapter.library}", 10)
    waits: list[float] = []
    while time.time() < start_at:
        time.sleep(0.001)
    deadline = start_at + seconds
    while time.time() < deadline:
        began = time.perf_counter()
        if not adapter.acquire(lock):
            continue
        waits.append(time.perf_counter() - began)
        adapter.release(lock)
    return {"done": len(waits), "waits": waits}


def contended_threads(adapter: Adapter, seconds: float, workers: int = 8) -> dict[str, Any]:
    results: list[dict[str, Any]] = []
    start_at = time.time() + 0.2
    threads = [
        threading.Thread(target=lambda i=i: results.append(contend(adapter, seconds, i, start_at)))
        for i in range(workers)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(seconds + 60)
    return summarize(results, seconds)


def _process_worker(library: str, url: str, seconds: float, channels: tuple[Any, ...]) -> None:
    ready, go, out = channels
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
    import django

    django.setup()
    adapter = Adapter(library, url)
    ready.put(os.getpid())
    go.wait(120)
    out.put(contend(adapter, seconds, os.getpid(), time.time()))


def contended_processes(library: str, url: str, seconds: float, workers: int = 4) -> dict[str, Any]:
    """``workers`` spawned processes contend for ``seconds`` once every one of them is ready."""
    context = multiprocessing.get_context("spawn")
    ready, out, go = context.Queue(), context.Queue(), context.Event()
    procs = [
        context.Process(target=_process_worker, args=(library, url, seconds, (ready, go, out)))
        for _ in range(workers)
    ]
    for proc in procs:
        proc.start()
    for _ in procs:
        ready.get(timeout=120)
    go.set()
    results = [out.get(timeout=seconds + 60) for _ in procs]
    for proc in procs:
        proc.join(30)
    return summarize(results, seconds)


def summarize(results: list[dict[str, Any]], seconds: float) -> dict[str, Any]:
    done = [r["done"] for r in results]
    waits = [w * 1000 for r in results for w in r["waits"]]
    return {
        "sections/s": sum(done) / seconds,
        "wait p50 ms": percentile(waits, 50),
        "wait p99 ms": percentile(waits, 99),
        "fairness min/max": (min(done) / max(done)) if max(done) else 0.0,
    }


def run(server: Any, quick: bool) -> dict[str, Any]:
    url = server.url
    seconds = 0.5 if quick else 2.0
    samples = 8 if quick else 40
    expiry_samples = 4 if quick else 12
    load_before = os.getloadavg()[0]
    adapters = [Adapter(library, url) for library in LIBRARIES]
    rounds = 3 if quick else 5
    speeds, per_round = uncontended(adapters, seconds / 2, rounds=rounds)
    ways = idioms(url, seconds / 2, rounds)
    print(f"\n## locks: idioms\n\n{table(ways['rows'], ways['columns'])}\n", flush=True)
    for note in ways["notes"]:
        print(f"- {note}")
    print(f"(written to {save(ways)})", flush=True)
    floor = wake_floor(url, samples)
    rows: list[dict[str, Any]] = []
    for adapter in adapters:
        library = adapter.library
        row: dict[str, Any] = {"library": library, **speeds[library]}
        if library in WAITING:
            released = wake_after_release(adapter, samples)
            expired = wake_after_expiry(adapter, expiry_samples)
            row.update(
                {
                    "wake after release p50 ms": percentile(released, 50),
                    "wake after release p99 ms": percentile(released, 99),
                    "wake after expiry p50 ms": percentile(expired, 50),
                    "wake after expiry p99 ms": percentile(expired, 99),
                }
            )
            threads = contended_threads(adapter, seconds)
            procs = contended_processes(library, url, seconds)
            row.update({f"8 threads {k}": v for k, v in threads.items()})
            row.update({f"4 procs {k}": v for k, v in procs.items()})
        rows.append(row)
        print(f"  {library}: done", flush=True)
    return {
        "name": "locks",
        "columns": COLUMNS,
        "rows": rows,
        "notes": [
            *notes(rows, per_round),
            f"one-round-trip wake floor (a bare LPUSH waking a BLPOP in another thread): p50 "
            f"{percentile(floor, 50):.2f} ms, p99 {percentile(floor, 99):.2f} ms; a wake-up after "
            f"release is two round trips (the release, then the woken waiter's acquire).",
            f"1-minute load average {load_before:.1f} before and {os.getloadavg()[0]:.1f} after "
            f"the run on {os.cpu_count()} CPUs (other work on the machine skews every column).",
            "Reproduce: python3 dev.py bench locks (it writes locks_idioms first, then this "
            "table). Idiom: one reused lock object per worker for every library (the README "
            "idiom and the default lock are in locks_idioms); cycles/s are rounds, the wake-up "
            "and contended columns one pass each.",
        ],
    }


COLUMNS = [
    "library",
    "cycles/s",
    "round trips/cycle",
    "wake after release p50 ms",
    "wake after release p99 ms",
    "wake after expiry p50 ms",
    "wake after expiry p99 ms",
    "8 threads sections/s",
    "8 threads wait p50 ms",
    "8 threads wait p99 ms",
    "8 threads fairness min/max",
    "4 procs sections/s",
    "4 procs wait p50 ms",
    "4 procs wait p99 ms",
    "4 procs fairness min/max",
]


def notes(rows: list[dict[str, Any]], per_round: list[dict[str, float]]) -> list[str]:
    by = {row["library"]: row for row in rows}
    ours = by["django-redislock"]

    def ratio(metric: str, peer: str) -> str:
        theirs = by[peer][metric]
        return f"{ours[metric] / theirs:.2f}x" if theirs else "n/a (peer made no progress)"

    def within(peer: str) -> str:
        return spread([r["django-redislock"] / r[peer] for r in per_round])

    return [
        "Our lock includes the fence and the admin index in its one-round-trip scripts. "
        "Every library here reuses one lock object (see the idioms table for the others).",
        f"uncontended (cycles/s: median of {len(per_round)} interleaved rounds; ratios within "
        f"a round, median (range)): vs raw floor {within('raw SET NX + EVALSHA')} "
        f"(target >= 0.9x); vs redis-py Lock {within('redis-py Lock')} (target >= 1x)",
        f"wake after release p50: {ours['wake after release p50 ms']:.2f} ms (target <= 1 ms)",
        f"wake after expiry p50: {ours['wake after expiry p50 ms']:.2f} ms (target <= 20 ms)",
        f"contended 8 threads vs python-redis-lock: "
        f"{ratio('8 threads sections/s', 'python-redis-lock')} (target >= 1.2x)",
        f"contended 4 processes vs python-redis-lock: "
        f"{ratio('4 procs sections/s', 'python-redis-lock')} (target >= 1.2x)",
        "python-redis-lock's expiry takes whole seconds, so its expiry test uses 1 s, others 0.2 s;"
        " wake-after-expiry is measured from the holder's expected expiry.",
    ]
