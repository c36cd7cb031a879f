#!/usr/bin/env python3
"""The project's commands; the README's two commands are ``demo`` and ``test``.

    python3 dev.py demo     run the flash-sale demo on an embedded Redis and print a report
    python3 dev.py test     lint, type-check, build the docs and run the whole test suite
    python3 dev.py test --under-load
                            the whole pytest run with two CPU-bound processes beside it
    python3 dev.py bench    run the benchmarks side by side with the peer libraries
    python3 dev.py soak locks --minutes N [--kind single|cluster|redlock|all] [--seed S]
                            the lock history check under faults, for longer than the suite

Each command creates (or reuses) a virtual environment in ``.venv`` (``REDISLOCK_VENV``
names another) and installs what it needs there: the project with its user extras and the
development tools of pyproject's ``[dependency-groups]`` (pip is upgraded in the environment
to 25.1+, which installs groups). A fresh machine needs only Python 3.10+ and pip.
"""

from __future__ import annotations

import glob
import os
import shutil
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


#: Extra environments the suite also runs in (COMPAT_TESTS, without the slow tests): the
#: oldest supported Python with the oldest Django, and Django 6 on Python 3.12.
COMPAT = (("3.10", "Django>=4.2,<4.3"), ("3.12", "Django>=6.0,<7"))

#: What the compatibility runs test: the modules whose code path depends on the Python or
#: Django version (without their ``slow`` tests). The rest of the suite exercises the Lua
#: scripts, the wire protocol and Redis through redis-py, the same on every Python and Django,
#: and runs once, in the main run; running all of it again twice cost ~11 minutes of CI.
COMPAT_TESTS = (
    # settings read lazily, system checks, the one family of value checks, handlers
    "tests/test_checks.py",
    "tests/test_checks_eviction.py",
    "tests/test_validation.py",
    "tests/test_handlers.py",
    # the admin: views, templates, forms, auth and CSRF (the browser tests are slow)
    "tests/admin",
    # management commands: BaseCommand, argparse, styles, verbosity, call_command
    "tests/test_command_messages.py",
    "tests/test_command_verbosity.py",
    "tests/test_cluster_commands.py",
    "tests/test_drain.py",
    "tests/test_lock_commands.py",
    "tests/test_queue_commands.py",
    "tests/test_flow_surfaces.py",
    # decorators on sync and async views and class-based views, request and response
    "tests/test_decorator.py",
    "tests/test_decorator_edges.py",
    # asyncio (3.10 has no asyncio.timeout, cancellation counting came in 3.11), threads, fork
    "tests/test_async_threads.py",
    "tests/test_calls_requests.py",
    "tests/test_calls_wait.py",
    "tests/test_lock_cancellation.py",
    "tests/test_lock_cancel_repeated.py",
    "tests/test_pools.py",
    "tests/test_redlock_async.py",
    "tests/test_results_wait.py",
    "tests/test_supervisor.py",
    # tasks: transactions and on_commit, django.tasks (6.0) or its backport (4.2), Celery,
    # periodic schedules (zoneinfo, DST)
    "tests/test_tasks.py",
    "tests/test_django_tasks.py",
    "tests/test_celery.py",
    "tests/test_periodic.py",
    "tests/test_periodic_faults.py",
    "tests/test_priority_periodic.py",
    # the ORM (the example shop's models, migrations, views), the metrics views
    "tests/test_shop.py",
    "tests/test_metrics.py",
    # public names, old import paths and their DeprecationWarnings, the docs' samples
    "tests/test_package.py",
    "tests/test_module_homes.py",
    "tests/test_moved_paths.py",
    "tests/test_docs.py",
)

#: The user extras the test suite exercises; the tools come from pyproject's dependency groups.
TEST_EXTRAS = "embedded,fakeredis,demo,tasks,celery,prometheus,periodic"

#: ``pip install --group`` (PEP 735 dependency groups) arrived in pip 25.1.
PIP_WITH_GROUPS = (25, 1)


def workers() -> list[str]:
    """pytest-xdist's options for a whole run: one test process more than the CPUs, two to four.

    Most of a test's time is spent waiting on Redis servers and on child processes (the load
    average stays near 1-2 on 2 CPUs with two test processes), so a third test process on
    2 CPUs took the main run from 15 to 10 minutes; more than four would start more private
    servers than they save.
    ``worksteal``: a process that runs out of tests takes half of the longest remaining
    share, and tests/conftest.py orders the tests so that each share starts with its part of
    the slow ones and ends with quick ones (the run used to keep the 222 slow tests in one
    process, one after another: the run's critical path).
    """
    return ["-n", str(min(max((os.cpu_count() or 1) + 1, 2), 4)), "--dist", "worksteal"]


def pip_version(python: Path) -> tuple[int, ...]:
    """The version of pip in the environment of ``python`` (``(0,)`` when it has none)."""
    probe = subprocess.run(
        [str(python), "-c", "import pip; print(pip.__version__)"],
        capture_output=True,
        text=True,
        check=False,
    )
    parts = probe.stdout.strip().split(".")[:2] if probe.returncode == 0 else ["0"]
    return tuple(int(part) for part in parts if part.isdigit())


def ensure_venv(
    extras: str,
    groups: tuple[str, ...] = (),
    where: Path = VENV,
    python: str = sys.executable,
    pins: tuple[str, ...] = (),
) -> Path:
    """Create a virtual environment; install the project with ``extras`` and ``groups``."""
    bin_dir = where / "bin"
    if not (bin_dir / "python").exists():
        print(f"creating {where} with {python}", flush=True)
        if python == sys.executable:
            venv.EnvBuilder(with_pip=True).create(where)
        else:
            run(python, "-m", "venv", where)
    if groups and pip_version(bin_dir / "python") < PIP_WITH_GROUPS:
        run(bin_dir / "python", "-m", "pip", "install", "--quiet", "--upgrade", "pip>=25.1")
    group_args = [arg for group in groups for arg in ("--group", group)]
    run(
        bin_dir / "python",
        *("-m", "pip", "install", "--quiet", "-e", f".[{extras}]"),
        *group_args,
        *pins,
    )
    return bin_dir


def find_python(version: str) -> str | None:
    """Find a ``python<version>`` on PATH or in pyenv; None when the machine has none."""
    candidates = [shutil.which(f"python{version}") or ""]
    root = os.environ.get("PYENV_ROOT", os.path.expanduser("~/.pyenv"))
    candidates += sorted(glob.glob(f"{root}/versions/{version}.*/bin/python{version}"))
    for candidate in filter(None, candidates):
        probe = subprocess.run([candidate, "-c", "import venv"], capture_output=True, check=False)
        if probe.returncode == 0:
            return candidate
    return None


def ensure_chromium() -> None:
    """Install Debian's ``chromium`` for the admin browser test when root can and it is missing.

    Playwright drives this system browser; ``playwright install`` is never run.
    Elsewhere the browser test skips itself and says why.
    """
    if os.path.exists("/usr/bin/chromium") or not hasattr(os, "geteuid") or os.geteuid() != 0:
        return
    if shutil.which("apt-get"):
        run("apt-get", "update", "-qq")
        run("apt-get", "install", "-y", "-qq", "chromium")


#: The longest a CPU burner of ``test --under-load`` runs (seconds), should nothing end it.
BURN_LIMIT = 3600

#: What each burner runs: a busy loop that ends by itself at BURN_LIMIT.
BURN = (
    "import sys, time\n"
    "end = time.monotonic() + float(sys.argv[1])\n"
    "while time.monotonic() < end: pass"
)


def under_load(args: list[str]) -> None:
    """Run the whole pytest run with two CPU-bound processes beside it.

    On a 2-core machine the suite then gets about half of each core, as it does on a
    shared CI runner beside another job. A test that fails only here waits on a
    wall-clock bound instead of an event, or has found a real race: either is a bug.
    The lint, type and docs steps and the compatibility runs are left out (no timing).
    """
    burners = [
        subprocess.Popen([sys.executable, "-c", BURN, str(BURN_LIMIT)], cwd=ROOT) for _ in range(2)
    ]
    print(f"+ CPU burners beside the suite: pids {[b.pid for b in burners]}", flush=True)
    try:
        run(BIN / "pytest", *(args or [*workers(), "--durations=15"]))
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()


def test() -> None:
    ensure_venv(TEST_EXTRAS, ("test",))
    ensure_chromium()
    if "--under-load" in sys.argv[2:]:
        under_load([arg for arg in sys.argv[2:] if arg != "--under-load"])
        return
    run(BIN / "ruff", "check", ".")
    run(BIN / "ruff", "format", "--check", ".")
    # bench too (about 1 s more): its peer libraries come with the bench group only, and
    # pyproject's mypy overrides let them be missing
    run(BIN / "mypy", "django_redislock", "tests", "bench")
    run(BIN / "lint-imports")
    run(BIN / "sphinx-build", "-W", "--keep-going", "-q", "-b", "html", "docs", "docs/_build/html")
    # the whole run reports its slowest tests, so the suite's time can be kept in check
    run(BIN / "pytest", *(sys.argv[2:] or [*workers(), "--durations=15"]))
    if sys.argv[2:]:
        return  # a focused run (python3 dev.py test -k ...) skips the compatibility runs
    for version, django in COMPAT:
        python = find_python(version)
        if python is None:
            print(f"skipping the Python {version} / {django} run: no python{version} here")
            continue
        name = django.split(",")[0].replace("Django>=", "django")
        where = ROOT / f".venv-py{version}-{name}"
        bin_dir = ensure_venv(TEST_EXTRAS, ("test",), where, python, (django,))
        run(
            bin_dir / "pytest",
            "-q",
            "-m",
            "not slow",
            "-p",
            "no:cacheprovider",
            *workers(),
            *COMPAT_TESTS,
        )


def demo() -> None:
    ensure_venv("demo")
    run(BIN / "python", ROOT / "example_project" / "demo.py", *sys.argv[2:])


#: arq, a peer of the worker benchmark. Installed without its dependencies: it pins
#: ``redis<6`` and runs on the redis-py this project is tested with (its ``click`` is in
#: the bench group).
ARQ = "arq>=0.25"


def bench() -> None:
    ensure_venv(TEST_EXTRAS, ("test", "bench"))
    run(BIN / "python", "-m", "pip", "install", "--quiet", "--no-deps", ARQ)
    run(BIN / "python", "-m", "bench", *sys.argv[2:])
    run(BIN / "python", "-m", "bench.plot")  # refresh the docs' plots and tables


def soak() -> None:
    """``soak locks``: tests/lockhistory's check under faults for ``--minutes``, split by kind.

    Prints the checker's table per kind (operations, holds, fenced writes, faults by type,
    violations by type) and exits non-zero when any violation was found.
    """
    import argparse

    parser = argparse.ArgumentParser(prog="dev.py soak", description=soak.__doc__)
    parser.add_argument("what", choices=["locks"])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--kind", default="all", choices=["single", "cluster", "redlock", "all"])
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--workers", type=int, default=4)
    options = parser.parse_args(sys.argv[2:])
    ensure_venv(TEST_EXTRAS, ("test",))
    kinds = 3 if options.kind == "all" else 1
    seconds = max(10.0, options.minutes * 60 / kinds)
    args = ["--kind", options.kind, "--seconds", f"{seconds:g}", "--workers", str(options.workers)]
    if options.seed is not None:
        args += ["--seed", str(options.seed)]
    run(BIN / "python", "-m", "tests.lockhistory.run", *args)


COMMANDS = {"test": test, "demo": demo, "bench": bench, "soak": soak}

if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in COMMANDS:
        print(__doc__)
        sys.exit(2)
    COMMANDS[sys.argv[1]]()
