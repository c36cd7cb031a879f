"""What the coordinator of a history run reads from Redis directly (no proxy, no fault).

:func:`sample_grants` records the fence of every mutex name held, every 25 ms, during the
run; :func:`leftovers` lists the holds and waiters still in Redis after it. The checker
compares them with what the workers reported.
"""

from __future__ import annotations

import json
import time
import zlib
from typing import TYPE_CHECKING, Any

import redis

if TYPE_CHECKING:
    from .run import Run


# -- grants seen in Redis -------------------------------------------------------------------


def sample_grants(run: Run, until: float, names: tuple[str, ...]) -> None:
    """Record the fence of every mutex name held in Redis, every 25 ms (direct, no proxy).

    The checker compares them with the holds the workers reported: a grant no holder ever
    had (it ends by its TTL) is reported apart, with the outcome that may explain it. On
    Redlock a grant counts when a majority of masters have the same fence.
    """
    clients = [server.client(socket_timeout=1.0) for server in run.servers]
    cluster = (
        redis.RedisCluster(host="127.0.0.1", port=run.servers[0].port)
        if run.kind == "cluster"
        else None
    )
    keys = {name: f"{run.prefix}:{{lk{zlib.crc32(name.encode()) % 16}}}:l:{name}" for name in names}
    out = open(run.directory / "grants.jsonl", "w")  # noqa: SIM115
    try:
        while time.monotonic() < until:
            for name, key in keys.items():
                t = time.monotonic()
                seen: list[int] = []
                for client in [cluster] if cluster is not None else clients:
                    try:
                        raw = client.hget(key, "f")
                    except (redis.RedisError, OSError):
                        continue
                    if raw is not None:
                        seen.append(int(raw))
                need = 2 if run.kind == "redlock" else 1
                for fence in set(seen):
                    if seen.count(fence) >= need:
                        out.write(json.dumps({"ev": "grant", "name": name, "fence": fence, "t": t}))
                        out.write("\n")
            time.sleep(0.025)
    finally:
        out.close()
        for client in clients:
            client.close()
        if cluster is not None:
            cluster.close()


# -- what is left ----------------------------------------------------------------------------


def leftovers(run: Run) -> list[dict[str, Any]]:
    """Lock holds still in Redis (all workers ended one longest TTL ago)."""
    found: list[dict[str, Any]] = []
    for server in run.servers:
        client = server.client(socket_timeout=5.0)
        now_ms = int(client.time()[0]) * 1000 + int(client.time()[1]) // 1000
        for key in client.scan_iter(match=f"{run.prefix}:*", count=1000):
            text = key.decode()
            part = text.split(":")
            if len(part) < 4:
                continue
            kind, name = part[2], ":".join(part[3:])
            if kind in ("l", "rw", "sp", "fl"):  # a hold, a writer, permits, a fair hold
                found.append({"name": name, "key": text, "pttl": client.pttl(key)})
            elif kind in ("sq", "sd", "fq", "fw") and client.pttl(key) == -1:  # waiters
                found.append({"name": name, "key": text, "pttl": -1})
            elif kind == "rr":
                late = client.zrangebyscore(key, "-inf", now_ms)
                if late or client.pttl(key) == -1:
                    found.append({"name": name, "key": text, "readers past deadline": len(late)})
    return found
