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

from bench.common import percentile, rate, round_trips

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


def uncontended(adapters: list[Adapter], seconds: float, rounds: int) -> dict[str, dict[str, Any]]:
    """Cycles/s (best of ``rounds`` interleaved runs, so load spikes hit everyone alike)."""
    cycles = {a.library: cycle_of(a) for a in adapters}
    found: dict[str, dict[str, Any]] = {}
    for library, cycle in cycles.items():
        for _ in range(200):
            cycle()
        with round_trips() as sent:
            for _ in range(500):
                cycle()
        found[library] = {"cycles/s": 0.0, "round trips/cycle": sent[0] / 500}
    for _ in range(rounds):
        for library, cycle in cycles.items():
            best = max(found[library]["cycles/s"], rate(cycle, seconds=seconds))
            found[library]["cycles/s"] = best
    return found


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
    speeds = uncontended(adapters, seconds / 2, rounds=3 if quick else 5)
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
            *notes(rows),
            f"one-round-trip wake floor (a bare LPUSH waking a BLPOP in another thread): p50 "
            f"{percentile(floor, 50):.2f} ms, p99 {percentile(floor, 99):.2f} ms; a wake-up after "
            f"release is two round trips (the release, then the woken waiter's acquire).",
            f"1-minute load average {load_before:.1f} before and {os.getloadavg()[0]:.1f} after "
            f"the run on {os.cpu_count()} CPUs (other work on the machine skews every column).",
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


def notes(rows: list[dict[str, Any]]) -> list[str]:
    by = {row["library"]: row for row in rows}
    ours = by["django-redislock"]

    def ratio(metric: str, peer: str) -> str:
        theirs = by[peer][metric]
        return f"{ours[metric] / theirs:.2f}x" if theirs else "n/a (peer made no progress)"

    return [
        "Our lock includes the fence and the admin index in its one-round-trip scripts.",
        f"uncontended vs raw floor: {ratio('cycles/s', 'raw SET NX + EVALSHA')} (target >= 0.9x)",
        f"uncontended vs redis-py Lock: {ratio('cycles/s', 'redis-py Lock')} (target >= 1x)",
        f"wake after release p50: {ours['wake after release p50 ms']:.2f} ms (target <= 1 ms)",
        f"wake after expiry p50: {ours['wake after expiry p50 ms']:.2f} ms (target <= 20 ms)",
        f"contended 8 threads vs python-redis-lock: "
        f"{ratio('8 threads sections/s', 'python-redis-lock')} (target >= 1.2x)",
        f"contended 4 processes vs python-redis-lock: "
        f"{ratio('4 procs sections/s', 'python-redis-lock')} (target >= 1.2x)",
        "python-redis-lock's expiry takes whole seconds, so its expiry test uses 1 s, others 0.2 s;"
        " wake-after-expiry is measured from the holder's expected expiry.",
    ]
