"""``manage.py release_lock NAME [--using ALIAS] [--yes]``: force-release a stuck lock."""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError, CommandParser

from ...conf import DEFAULT_ALIAS
from ...exceptions import ConfigurationError, RedisLockError
from ...handlers import locks
from ._logging import LoggedCommand


class Command(LoggedCommand):
    help = (
        "End every hold on the lock NAME, whoever owns it, and bump its fence: every later "
        "grant gets a larger fence, and a holder that is still running gets LockLost at its "
        "next check, extension, renewal or release. Its fenced writes are refused once the "
        "resource has recorded a newer fence (the next holder's first fenced write); a "
        "force-release alone does not stop a fenced write it makes before that. Stop the "
        "holder's process first if it may still write. Asks first unless --yes."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name", help="The lock name, as list_locks shows it.")
        parser.add_argument("--using", default=DEFAULT_ALIAS, help="The REDISLOCK_LOCKS alias.")
        parser.add_argument("--yes", action="store_true", help="Do not ask for confirmation.")

    def handle(self, *args: Any, **options: Any) -> None:
        name, using = options["name"], options["using"]
        if not options["yes"] and not self.confirm(name, using):
            raise CommandError("Not released.")
        try:
            released = locks[using].force_release(name)
        except (RedisLockError, ConfigurationError, ValueError) as exc:
            raise CommandError(str(exc)) from exc
        if released:
            self.stdout.write(self.style.SUCCESS(f"Released {name!r} on {using!r}."))
        else:
            self.stdout.write(f"{name!r} was not held on {using!r}; its fence was bumped anyway.")

    def confirm(self, name: str, using: str) -> bool:
        """Ask on the terminal; anything but yes/y declines."""
        answer = input(f"Force-release lock {name!r} on alias {using!r}? [y/N] ")
        return answer.strip().lower() in ("y", "yes")
