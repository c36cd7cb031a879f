"""``python -m bench [NAME ...] [--quick]``: run benchmarks on a private server and print tables."""

from __future__ import annotations

import argparse
import compileall
import importlib
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import save, table
from tests.servers import RedisProcess

ROOT = Path(__file__).resolve().parent.parent

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


def compile_sources() -> None:
    """Compile this checkout's modules to byte-code before any process is timed.

    The peers' packages were compiled when pip installed them, and a deployed worker runs
    from compiled files too; this checkout (installed editable) is not, and with
    ``PYTHONDONTWRITEBYTECODE`` set no run ever writes its ``.pyc`` files, so every worker
    spawned for a benchmark would compile the package again (about 0.2 s of a start-up).
    Python reads existing ``.pyc`` files whatever that variable says.
    """
    for folder in ("django_redislock", "bench", "tests"):
        compileall.compile_dir(ROOT / folder, quiet=1)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("names", nargs="*", help=f"which to run (default all: {SUITES})")
    parser.add_argument("--quick", action="store_true", help="smaller numbers, for a smoke run")
    args = parser.parse_args()
    compile_sources()
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
