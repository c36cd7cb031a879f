import time
from django.test import Client
from django_redislock.queue.workers import beat
from .conftest import BASE, Dashboard
from .test_workers_page import record

def timed(client, url, **q):
    out = []
    for _ in range(5):
        t = time.perf_counter(); r = client.get(url, q); out.append(time.perf_counter() - t)
        assert r.status_code == 200
    out.sort()
    return out[2], out[0], out[-1], len(r.content)

def test_measure(single: Dashboard, admin_client: Client) -> None:
    tasks = [{"id": f"t{i}", "queue": "orders", "age": 1.0} for i in range(100)]
    for i in range(200):
        beat(single.queues, f"w{i:03d}", 120, record(host=f"host-{i % 7}", pid=i, pool="async", concurrency=100, tasks=tasks if i < 50 else []))
    q = single.queue()
    for i in range(1000):
        q.enqueue(f"r{i}", {"task": "x", "args": [], "kwargs": {}})
    claimed = q.pop(1000)
    for t in claimed:
        q.retry(t, delay=0, error="TimeoutError: " + "x" * 1400, runtime=0.5)
    for name, url in (("workers", BASE + "workers/"), ("workers-live", BASE + "workers/?live=1"), ("runs", BASE + "queues/default/orders/runs/"), ("runs-filter", BASE + "queues/default/orders/runs/?error=TimeoutError&page=3")):
        med, lo, hi, size = timed(admin_client, url)
        print(f"MEASURE {name:14} median {med*1000:7.1f} ms (range {lo*1000:.1f}-{hi*1000:.1f}) {size/1024:.1f} KiB")
