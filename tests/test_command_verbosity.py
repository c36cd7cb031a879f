"""Every command of the app shows its ``django_redislock`` log records by ``--verbosity``."""

from __future__ import annotations

import io
import logging
from typing import Any

import pytest
from django.core.management import call_command, get_commands, load_command_class

COMMANDS = sorted(name for name, app in get_commands().items() if app == "django_redislock")
LOG = logging.getLogger("django_redislock.test_verbosity")


def positionals(command: Any, name: str) -> list[str]:
    """A value for each required positional argument of ``name`` (its first choice, if any)."""
    parser = command.create_parser("manage.py", name)
    return [
        str(action.choices[0]) if action.choices else "x"
        for action in parser._actions
        if not action.option_strings and action.nargs not in ("?", "*")
    ]


def emit(*args: Any, **options: Any) -> None:
    LOG.debug("debug line")
    LOG.info("info line")
    LOG.warning("warning line")


@pytest.mark.parametrize("name", COMMANDS)
@pytest.mark.parametrize(
    ("verbosity", "shown"),
    [
        (0, set()),
        (1, {"warning"}),
        (2, {"warning", "info"}),
        (3, {"warning", "info", "debug"}),
    ],
)
def test_every_command_logs_by_verbosity(
    name: str, verbosity: int, shown: set[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(logging.root, "handlers", [])  # as under manage.py, without pytest's
    command = load_command_class("django_redislock", name)
    command.handle = emit  # type: ignore[method-assign]
    err = io.StringIO()
    call_command(command, *positionals(command, name), verbosity=verbosity, stderr=err)
    seen = {level for level in ("debug", "info", "warning") if f"{level} line" in err.getvalue()}
    assert seen == shown
    assert not logging.getLogger("django_redislock").handlers
