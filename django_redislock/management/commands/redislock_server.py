"""``manage.py redislock_server status|stop``: look after ``embedded://`` servers."""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError, CommandParser

from ... import embedded
from ...connections import embedded_path
from ...handlers import locks, queues
from ._logging import LoggedCommand


class Command(LoggedCommand):
    help = "Show or stop the embedded Redis servers used by embedded:// aliases."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "action",
            choices=["status", "stop"],
            help="status: print each server's pid and the pids of the processes using it; "
            "stop: shut each server down (it saves its data first).",
        )
        parser.add_argument(
            "--path",
            help="An embedded server directory (default: every "
            "embedded:// LOCATION in REDISLOCK_LOCKS and REDISLOCK_QUEUES).",
        )

    def handle(self, *args: Any, action: str, path: str | None, **options: Any) -> None:
        paths = [path] if path else configured_paths()
        if not paths:
            raise CommandError("No alias uses embedded://; pass --path DIR.")
        for folder in paths:
            if action == "stop":
                stopped = embedded.stop_server(folder)
                self.stdout.write(
                    self.style.SUCCESS(f"stopped {folder}") if stopped else f"not running: {folder}"
                )
            else:
                pid = embedded.server_pid(folder)
                state = f"running, pid {pid}, users {embedded.users(folder)}" if pid else "stopped"
                self.stdout.write(f"{folder}: {state}")


def configured_paths() -> list[str]:
    """Return the directories of every ``embedded://`` location in the settings."""
    found: list[str] = []
    for handler in (locks, queues):
        for alias in handler:
            location = handler.settings[alias].get("LOCATION", "")
            items = [location] if isinstance(location, str) else list(location)
            for item in items:
                if isinstance(item, str) and item.startswith("embedded://"):
                    path = embedded_path(item)
                    if path not in found:
                        found.append(path)
    return found
