#!/usr/bin/env python3
"""The project's commands; the README's two commands are ``demo`` and ``test``.

    python3 dev.py demo     run the flash-sale demo on an embedded Redis and print a report
    python3 dev.py test     lint, type-check, build the docs and run the whole test suite
    python3 dev.py bench    run the benchmarks side by side with the peer libraries

Each command creates (or reuses) a virtual environment in ``.venv`` and installs
what it needs there, so a fresh machine needs only Python 3.10+ and pip.
"""

from __future__ import annotations

import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / os.environ.get("REDISLOCK_VENV", ".venv")
BIN = VENV / "bin"


def run(*args: str | Path, env: dict[str, str] | None = None) -> None:
    """Run a command from the project root; stop with its exit code when it fails."""
    print("+", " ".join(str(a) for a in args), flush=True)
    result = subprocess.run([str(a) for a in args], check=False, cwd=ROOT, env=env)
    if result.returncode != 0:
        sys.exit(result.returncode)


def ensure_venv(extras: str) -> None:
    """Create ``.venv`` and install the project with ``extras`` (quick when already done)."""
    if not (BIN / "python").exists():
        print(f"creating {VENV}", flush=True)
        venv.EnvBuilder(with_pip=True).create(VENV)
        run(BIN / "python", "-m", "pip", "install", "--quiet", "--upgrade", "pip")
    run(BIN / "python", "-m", "pip", "install", "--quiet", "-e", f".[{extras}]")


def test() -> None:
    ensure_venv("test")
    run(BIN / "ruff", "check", ".")
    run(BIN / "ruff", "format", "--check", ".")
    run(BIN / "mypy", "django_redislock", "tests")
    run(BIN / "sphinx-build", "-W", "--keep-going", "-q", "-b", "html", "docs", "docs/_build/html")
    run(BIN / "pytest", *sys.argv[2:])


def demo() -> None:
    ensure_venv("embedded")
    run(BIN / "python", "-m", "django_redislock.demo", *sys.argv[2:])


def bench() -> None:
    ensure_venv("test,bench")
    run(BIN / "python", "-m", "bench", *sys.argv[2:])


COMMANDS = {"test": test, "demo": demo, "bench": bench}

if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in COMMANDS:
        print(__doc__)
        sys.exit(2)
    COMMANDS[sys.argv[1]]()
