"""Operator commands say when nothing matched, show their defaults, and match the docs."""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.core.management import call_command, get_commands, load_command_class
from django.core.management.base import CommandError
from django.test import override_settings

from django_redislock import queues
from django_redislock.queue import Queue

from .conftest import RedisTarget

ROOT = Path(__file__).resolve().parent.parent
COMMANDS = sorted(name for name, app in get_commands().items() if app == "django_redislock")
#: Options every Django command has; the docs' synopses leave them out.
DJANGO_OPTIONS = {
    "-h",
    "--help",
    "--version",
    "-v",
    "--verbosity",
    "--settings",
    "--pythonpath",
    "--traceback",
    "--no-color",
    "--force-color",
    "--skip-checks",
}


@pytest.fixture
def q(single_target: RedisTarget) -> Iterator[Queue]:
    params = {**single_target.params(MAX_ATTEMPTS=1), "KEY_PREFIX": "msgs"}
    with override_settings(REDISLOCK_QUEUES={"default": params}):
        queue: Queue = queues["default"].queue("jobs")
        queue.purge()
        yield queue


def run(*args: str) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def help_of(name: str) -> str:
    command = load_command_class("django_redislock", name)
    return command.create_parser("manage.py", name).format_help()


def test_purge_of_an_unknown_queue_fails_and_names_the_known_ones(q: Queue) -> None:
    q.enqueue("a")
    with pytest.raises(
        CommandError, match=r"Alias 'default' has no queue 'nosuchqueue'; known queues: 'jobs'\."
    ):
        run("purge_queue", "nosuchqueue", "--yes")
    assert q.stats()["ready"] == 1


def test_drain_of_a_misspelt_queue_fails_and_names_the_known_ones(q: Queue) -> None:
    q.enqueue("a")
    with pytest.raises(
        CommandError, match=r"Alias 'default' has no queue 'jbos'; known queues: 'jobs'\."
    ):
        run("drain_queue", "jobs", "jbos", "--burst")
    assert q.stats()["ready"] == 1  # the good name in the same call was not drained either


def test_drain_says_which_name_is_the_queue_and_which_the_alias(q: Queue) -> None:
    q.enqueue("a")
    q.remove("a")
    first = run("drain_queue", "jobs", "--burst").splitlines()[0]
    assert first == "Draining queue jobs (alias default); Ctrl+C to stop."


def test_purge_of_an_empty_known_queue_says_so(q: Queue) -> None:
    q.enqueue("a")
    q.remove("a")
    assert run("purge_queue", "jobs", "--yes") == "Nothing to delete: queue 'jobs' is empty.\n"


def test_requeue_dead_of_an_id_that_is_not_dead_fails(q: Queue) -> None:
    q.enqueue_many([("t1", 1), ("t2", 2)])
    for task in q.pop(1):
        q.retry(task, error="x")  # t1 is dead (MAX_ATTEMPTS=1), t2 is ready
    with pytest.raises(CommandError, match=r"Not in the dead-letter set of 'jobs': 'nope', 't2'\."):
        run("requeue_dead", "jobs", "--id", "t1", "--id", "nope", "--id", "t2")
    assert q.stats()["dead"] == 0 and q.stats()["ready"] == 2
    with pytest.raises(CommandError, match=r"Not in the dead-letter set of 'jobs': 'nope'\."):
        run("requeue_dead", "jobs", "--id", "nope")


def test_requeue_dead_says_when_nothing_is_dead(q: Queue) -> None:
    q.enqueue("a")
    assert run("requeue_dead", "jobs") == "Nothing to requeue: queue 'jobs' has no dead tasks.\n"
    with pytest.raises(CommandError, match="has no queue 'typo'"):
        run("requeue_dead", "typo")


def test_help_shows_defaults_and_repeatable_options() -> None:
    def flat(name: str) -> str:
        return " ".join(help_of(name).split())

    assert "Tasks claimed per round trip (default: 100;" in flat("drain_queue")
    assert "Most locks to list (default: 100)." in flat("list_locks")
    assert "The REDISLOCK_QUEUES alias (default: default)." in flat("purge_queue")
    assert "repeat --id for several" in flat("requeue_dead")
    assert "status: print each server's pid" in flat("redislock_server")


def own_options(name: str) -> set[str]:
    command = load_command_class("django_redislock", name)
    parser = command.create_parser("manage.py", name)
    found = {option for action in parser._actions for option in action.option_strings}
    return found - DJANGO_OPTIONS


def synopses() -> dict[str, set[str]]:
    """Options named by the docs' synopsis lines (``manage.py CMD ... [--opt ...]``)."""
    found: dict[str, set[str]] = {}
    for page in sorted((ROOT / "docs").glob("*.md")):
        current = None
        for line in page.read_text(encoding="utf-8").splitlines():
            match = re.search(r"manage\.py (\w+)(.*)", line)
            if match and "[" in match[2]:
                current = match[1]
                text = match[2]
            elif current and line.startswith(" ") and line.strip().startswith("["):
                text = line
            else:
                current = None
                continue
            found.setdefault(current, set()).update(re.findall(r"--[\w-]+", text.split("#")[0]))
    return found


@pytest.mark.parametrize("name", COMMANDS)
def test_docs_synopsis_matches_help(name: str) -> None:
    documented = synopses()
    assert name in documented, f"no synopsis of {name} in docs/ (a line with [--option])"
    assert documented[name] == own_options(name)


def test_options_used_in_the_docs_exist() -> None:
    unknown = []
    for page in sorted((ROOT / "docs").glob("*.md")):
        for line in page.read_text(encoding="utf-8").splitlines():
            match = re.search(r"manage\.py (\w+)(.*)", line)
            if match and match[1] in COMMANDS:
                for option in re.findall(r"(?<![\w-])--[\w-]+", match[2].split("#")[0]):
                    if option not in own_options(match[1]) | DJANGO_OPTIONS:
                        unknown.append(f"{page.name}: {match[1]} {option}")
    assert unknown == []
