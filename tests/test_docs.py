"""The docs' guarantee tables name tests that exist."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.test import override_settings

import django_redislock
import django_redislock.exceptions

from .conftest import RedisTarget

ROOT = Path(__file__).resolve().parent.parent
#: `tests/x.py`, `tests/x.py::test_name`, or `::test_name` (same file as the last path named).
REFERENCE = re.compile(r"`(tests/[\w/]+\.py)?(?:::(\w+)\*?)?`")


def references(doc: Path) -> list[tuple[str, str | None]]:
    found: list[tuple[str, str | None]] = []
    for line in doc.read_text(encoding="utf-8").splitlines():
        path = None
        for match in REFERENCE.finditer(line):
            path = match.group(1) or path
            if path is not None and (match.group(1) or match.group(2)):
                found.append((path, match.group(2)))
    return found


@pytest.mark.parametrize("doc", sorted((ROOT / "docs").glob("*.md")), ids=lambda p: p.name)
def test_every_test_a_doc_names_exists(doc: Path) -> None:
    missing = []
    for path, name in references(doc):
        source = ROOT / path
        if not source.is_file():
            missing.append(path)
        elif name is not None and f"def {name}" not in source.read_text(encoding="utf-8"):
            missing.append(f"{path}::{name}")
    assert missing == []


# -- the settings reference ------------------------------------------------------------------


def test_settings_reference_is_current() -> None:
    """docs/settings.md is what ``python -m django_redislock.docs settings`` prints."""
    from django_redislock.docs import settings_page

    on_disk = (ROOT / "docs" / "settings.md").read_text(encoding="utf-8")
    assert on_disk == settings_page(), (
        "docs/settings.md is stale: run python -m django_redislock.docs settings > docs/settings.md"
    )


def test_settings_command_prints_the_reference() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    done = subprocess.run(
        [sys.executable, "-m", "django_redislock.docs", "settings"],
        capture_output=True,
        text=True,
        cwd=ROOT.parent,
        env=env,
        check=False,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == (ROOT / "docs" / "settings.md").read_text(encoding="utf-8")
    assert "| `DEFAULT_TTL` | `30.0` |" in done.stdout


def skip_unless_generated_here() -> None:
    """api.md's signatures depend on Python and Django: compare it where it was generated."""
    import django

    head = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")[:600]
    made = re.search(r"on Python (\S+) with Django (\S+) ", head)
    here = (".".join(map(str, sys.version_info[:2])), ".".join(map(str, django.VERSION[:2])))
    if made is None or made.groups() != here:
        pytest.skip(f"docs/api.md is generated on {made and made.groups()}, this is {here}")


def test_api_reference_is_current() -> None:
    """docs/api.md is what ``python -m django_redislock.docs api`` prints (from the docstrings)."""
    from django_redislock.docs import api_page

    skip_unless_generated_here()
    on_disk = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    assert on_disk == api_page(), (
        "docs/api.md is stale: run python -m django_redislock.docs api > docs/api.md"
    )


def test_api_command_prints_the_reference_as_markdown() -> None:
    skip_unless_generated_here()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    done = subprocess.run(
        [sys.executable, "-m", "django_redislock.docs", "api"],
        capture_output=True,
        text=True,
        cwd=ROOT.parent,
        env=env,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    # Markdown that reads on disk: signatures and docstrings, no Sphinx directives.
    assert "automodule" not in done.stdout and "eval-rst" not in done.stdout
    assert "#### class `distributed_lock`" in done.stdout
    assert "**`Queue.enqueue(id: str, payload: Any = None," in done.stdout


def test_every_option_is_in_the_reference() -> None:
    from django_redislock import conf

    page = (ROOT / "docs" / "settings.md").read_text(encoding="utf-8")
    for schema in (
        conf.CONNECTION_OPTIONS,
        conf.LOCK_OPTIONS,
        conf.REDLOCK_OPTIONS,
        conf.QUEUE_OPTIONS,
        conf.TASK_OPTIONS,
    ):
        for key in schema:
            assert f"| `{key}` |" in page


# -- the samples -------------------------------------------------------------------------------

#: The first line of a fenced ``python`` block that is a sketch, not run by the tests.
SKETCH = "# sketch"
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
#: ``expr  # True`` / ``expr  # False``: the doctest-style claims checked on each sample.
CLAIM = re.compile(r"^(?P<expr>[^=#\s][^#]*?)\s+# (?P<value>True|False)\b")


def python_blocks() -> list[tuple[str, int, str]]:
    """Every fenced ``python`` block: (page, line of the fence, code)."""
    blocks = []
    for page in PAGES:
        lines = page.read_text(encoding="utf-8").splitlines()
        start = None
        for number, line in enumerate(lines, 1):
            if start is None and line.strip() == "```python":
                start = number
            elif start is not None and line.strip() == "```":
                blocks.append((page.name, start, "\n".join(lines[start : number - 1])))
                start = None
    return blocks


BLOCKS = python_blocks()
RUNNABLE = [block for block in BLOCKS if not block[2].startswith(SKETCH)]


def with_claims(code: str) -> str:
    """Turn ``expr  # True`` lines into assertions (doctest-style outputs)."""
    out = []
    for line in code.splitlines():
        match = CLAIM.match(line)
        if match is None:
            out.append(line)
        else:
            out.append(f"assert ({match['expr']}) is {match['value']}, {match['expr']!r}")
    return "\n".join(out)


def test_samples_are_found_and_most_run() -> None:
    assert len(BLOCKS) >= 20
    assert len(RUNNABLE) > len(BLOCKS) / 2


def run_sample(page: str, line: int, code: str, base_dir: Path) -> None:
    """Run one sample as a reader would paste it into ``manage.py shell``."""
    namespace: dict[str, object] = {"__name__": f"docs_sample_{line}", "BASE_DIR": base_dir}
    exec(compile(with_claims(code), f"{page}:{line}", "exec"), namespace)
    from django_redislock.checks import check_settings, check_tasks
    from django_redislock.handlers import locks, queues

    defined = {
        name: namespace[name]
        for name in ("REDISLOCK_LOCKS", "REDISLOCK_QUEUES", "TASKS")
        if name in namespace
    }
    if defined:
        with override_settings(**defined):
            locks.reset()
            queues.reset()
            assert check_settings() + check_tasks() == []
        locks.reset()
        queues.reset()


@pytest.mark.parametrize(
    ("page", "line", "code"), RUNNABLE, ids=[f"{page}:{line}" for page, line, _ in RUNNABLE]
)
def test_sample_runs_twice_and_leaves_nothing(
    page: str, line: int, code: str, tmp_path: Path, single_target: RedisTarget
) -> None:
    """Each runnable sample runs as shown on a real server, twice in a row (pasted twice), and
    leaves no queue, task or held lock behind (so no sample disturbs the next one)."""
    from django_redislock.handlers import locks, queues

    real = {"default": single_target.params()}
    try:
        with override_settings(REDISLOCK_LOCKS=real, REDISLOCK_QUEUES=real):
            for _ in range(2):
                locks.reset()
                queues.reset()
                run_sample(page, line, code, tmp_path)
            locks.reset()
            queues.reset()
            assert queues["default"].queue_names() == [], "the sample left a queue behind"
            assert locks["default"].held_locks() == [], "the sample left a lock held"
    finally:
        locks.reset()
        queues.reset()


#: Names a sketch may use only after importing them (the NameError a reader would get).
LIBRARY_NAMES = set(django_redislock.__all__) | {
    name
    for name, value in vars(django_redislock.exceptions).items()
    if isinstance(value, type) and value.__module__ == django_redislock.exceptions.__name__
}


def unimported_library_names(code: str) -> set[str]:
    """The library's public names that ``code`` uses without importing or defining them."""
    tree = ast.parse(code)
    bound: set[str] = set()
    used: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            bound |= {(alias.asname or alias.name).split(".")[0] for alias in node.names}
        elif isinstance(node, ast.Name):
            (used if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
    return (used - bound) & LIBRARY_NAMES


SKETCHES = [block for block in BLOCKS if block[2].startswith(SKETCH)]


@pytest.mark.parametrize(
    ("page", "line", "code"), SKETCHES, ids=[f"{page}:{line}" for page, line, _ in SKETCHES]
)
def test_sketch_compiles_with_its_imports(page: str, line: int, code: str) -> None:
    """A sketch is not run, but it is Python a reader can paste: it compiles (top-level
    ``await`` allowed), and every name of the library it uses is imported in it."""
    compile(code, f"{page}:{line}", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    assert unimported_library_names(code) == set()


def test_the_sketch_check_finds_a_missing_import() -> None:
    assert unimported_library_names("@task()\ndef f(): ...") == {"task"}
    assert (
        unimported_library_names("from django_redislock import task\n@task()\ndef f(): ...")
        == set()
    )


def test_sketch_convention_is_documented() -> None:
    contributing = (ROOT / "docs" / "contributing.md").read_text(encoding="utf-8")
    assert f"`{SKETCH}`" in contributing


def test_claims_in_samples_are_checked() -> None:
    code = with_claims("values = {1}\n1 in values  # True\nvalues.add(2)\n3 in values  # True: no")
    with pytest.raises(AssertionError, match="3 in values"):
        exec(code, {})
    assert sum("# True" in code for _, _, code in RUNNABLE) >= 1


# -- the README on the package index ---------------------------------------------------------


def test_readme_links_every_page_with_absolute_urls() -> None:
    """The README is the package index's description: relative links break there."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    from django_redislock.docs import DOCS_URL, HOME

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    links = re.findall(r"\]\(([^)]+)\)", readme)
    assert [link for link in links if not link.startswith("https://")] == []
    pages = {p.name for p in (ROOT / "docs").glob("*.md")} - {"index.md", "changelog.md"}
    assert {page for page in pages if f"{DOCS_URL}{page}" not in links} == set()
    urls = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["urls"]
    assert urls["Homepage"] == HOME
    assert all(url.startswith(HOME) for url in urls.values())


# -- docs/testing.md's pattern for tasks queued at the commit ----------------------------------


@pytest.mark.django_db
def test_the_testing_pages_commit_pattern_sends_the_task(
    django_capture_on_commit_callbacks: Any, single_target: RedisTarget
) -> None:
    """What docs/testing.md's ``captureOnCommitCallbacks`` sketch claims, on a real server."""
    from django.db import transaction

    from django_redislock import queues, task

    @task(queue="docs-on-commit")
    def send_receipt(order_id: int) -> None: ...

    with override_settings(REDISLOCK_QUEUES={"default": single_target.params()}):
        with django_capture_on_commit_callbacks(execute=True) as callbacks, transaction.atomic():
            sent = send_receipt.delay(42)
            assert sent.queued is None  # not sent yet: the commit sends it
        assert len(callbacks) == 1 and sent.queued is True
        assert queues["default"].queue("docs-on-commit").stats()["ready"] == 1
