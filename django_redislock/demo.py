"""The flash-sale demo behind ``python3 dev.py demo``.

The full demo (an embedded Redis, a running shop, hundreds of concurrent
buyers and a report) lands with the seckill issue; until then this entry point
says so and exits 0.
"""

from __future__ import annotations


def main() -> int:
    print("demo: see the seckill issue (the flash-sale demo is not built yet)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
