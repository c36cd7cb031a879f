"""A worker process's start-up imports what its first claim needs, not the whole app.

``django.setup()`` imports every installed app's package, its ``AppConfig.ready()`` and
(with the admin installed) its ``admin`` module; a ``drain_queue`` process then imports
the worker. None of that may pull in the lock classes, the lock decorator and its HTTP
responses, the periodic scheduler, the seckill stock or the admin's pages: they cost a
fresh worker about 70 ms of CPU before its first task (docs/workers.md, "Start-up").
Each check runs in a new interpreter, so no other test's imports count.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: A project with Django's usual apps, the admin and this app, nothing of the test suite's.
SETUP = """
import json, sys
import django
from django.conf import settings
settings.configure(
    INSTALLED_APPS=[
        "django.contrib.admin", "django.contrib.auth", "django.contrib.contenttypes",
        "django.contrib.sessions", "django.contrib.messages", "django.contrib.staticfiles",
        "django_redislock",
    ],
    REDISLOCK_LOCKS={"default": {"LOCATION": "redis://127.0.0.1:1/0"}},
    REDISLOCK_QUEUES={"default": {"LOCATION": "redis://127.0.0.1:1/0"}},
)
django.setup()
import django_redislock.queue.worker
"""

#: What a worker never needs before its first task.
NOT_AT_START = [
    "django_redislock.admin.common",
    "django_redislock.admin.overview",
    "django_redislock.admin.queues",
    "django_redislock.decorators.lock",
    "django_redislock.decorators.responses",
    "django_redislock.inventory.stock",
    "django_redislock.locking.base",
    "django_redislock.locking.mutex",
    "django_redislock.locking.readwrite",
    "django_redislock.periodic.scheduler",
]


def run(code: str) -> object:
    """The JSON a fresh interpreter prints last after ``SETUP`` and ``code``."""
    done = subprocess.run(
        [sys.executable, "-c", SETUP + code],
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def test_setup_and_the_worker_module_import_none_of_what_the_first_claim_does_not_need() -> None:
    loaded = run(f"print(json.dumps([m for m in {NOT_AT_START!r} if m in sys.modules]))")
    assert loaded == []


def test_the_public_names_still_resolve_when_first_asked_for() -> None:
    found = run(
        "from django_redislock import distributed_lock, locks, periodic_task, queues, task\n"
        "import django_redislock, django_redislock.locking as locking\n"
        "from django_redislock.decorators import locked_response\n"
        "from django_redislock.locking import Lock, ReadWriteLock, watchdog\n"
        "from django_redislock.handlers import locks as handler\n"
        "print(json.dumps([\n"
        "    locks is handler, callable(distributed_lock), callable(periodic_task),\n"
        "    callable(task), type(queues).__name__, Lock.__name__, ReadWriteLock.__name__,\n"
        "    type(watchdog).__name__ == 'Watchdog',\n"
        "    callable(locked_response), 'task' in dir(django_redislock),\n"
        "    locking.Lock is Lock,\n"
        "]))"
    )
    assert found == [True, True, True, True, "QueueHandler", "Lock", "ReadWriteLock"] + [True] * 4


def test_an_unknown_name_is_an_attribute_error_naming_it() -> None:
    found = run(
        "import django_redislock, django_redislock.locking, django_redislock.decorators\n"
        "errors = []\n"
        "for module in (django_redislock, django_redislock.locking, django_redislock.decorators):\n"
        "    try:\n"
        "        module.no_such_name\n"
        "    except AttributeError as exc:\n"
        "        errors.append('no_such_name' in str(exc))\n"
        "print(json.dumps(errors))"
    )
    assert found == [True, True, True]
