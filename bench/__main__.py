"""``python -m bench [NAME ...] [--quick]``: run benchmarks on a private server and print tables."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import save, table
from tests.servers import RedisProcess

#: Benchmark modules in the order they run; each has ``run(server, quick) -> dict``.
SUITES: list[str] = [
    "queue",
    "memory",
    "locks",
    "seckill",
    "sold_out",
    "shop_sold_out",
    "shards",
    "shards_server",
    "periodic",
    "workers",
    "pool",
    "pickup",
    "limiter",
    "limiter_peers",
    "chord",
    "semaphore",
    "fair",
    "groups",
    "admin_walk",
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("names", nargs="*", help=f"which to run (default all: {SUITES})")
    parser.add_argument("--quick", action="store_true", help="smaller numbers, for a smoke run")
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
    import django

    django.setup()
    with tempfile.TemporaryDirectory() as tmp:
        server = RedisProcess(Path(tmp)).start()
        try:
            for name in args.names or SUITES:
                module = importlib.import_module(f"bench.{name}")
                result = module.run(server, args.quick)
                path = save(result)
                print(f"\n## {name}\n\n{table(result['rows'], result['columns'])}\n")
                for note in result.get("notes", []):
                    print(f"- {note}")
                print(f"(written to {path})")
        finally:
            from django_redislock.inventory.sold_out_counts import counts

            counts.discard()  # sold-out refusal counts: not flushed at exit to a stopped server
            server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
