"""``manage.py list_locks [--using A] [--prefix P] [--limit N] [--after|--before NAME] [--json]``.

Pages by name like the admin: ``--after`` the last name shown is the next page, ``--before``
the first name shown is the previous one (the cursors are printed, and in ``--json`` they are
``next_after`` and ``previous_before``).
"""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import CommandError, CommandParser

from ...backends.base import BaseLockBackend
from ...conf import DEFAULT_ALIAS
from ...exceptions import ConfigurationError, RedisLockError
from ...handlers import locks
from ._logging import LoggedCommand


class Command(LoggedCommand):
    help = "List the locks held on a REDISLOCK_LOCKS alias, in name order, from its index."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--using",
            default=DEFAULT_ALIAS,
            help="The REDISLOCK_LOCKS alias (default: %(default)s).",
        )
        parser.add_argument("--prefix", default="", help="Only names starting with this.")
        parser.add_argument(
            "--limit", type=int, default=100, help="Most locks to list (default: %(default)s)."
        )
        parser.add_argument("--after", default=None, help="Start after this name (paging).")
        parser.add_argument(
            "--before", default=None, help="The page that ends just before this name (paging)."
        )
        parser.add_argument("--json", action="store_true", help="Print one JSON document.")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            backend: BaseLockBackend = locks[options["using"]]
            if not backend.supports_listing:
                raise CommandError(f"The backend of {options['using']!r} cannot list locks.")
            page = backend.held_locks_page(
                prefix=options["prefix"],
                limit=options["limit"],
                after=options["after"],
                before=options["before"],
            )
        except (RedisLockError, ConfigurationError, AttributeError, ValueError) as exc:
            raise CommandError(str(exc)) from exc
        if options["json"]:
            document = {
                "alias": options["using"],
                "total": page.total,
                "next_after": page.next_after,
                "previous_before": page.previous_before,
                "locks": [held.as_dict() for held in page.locks],
            }
            self.stdout.write(json.dumps(document, indent=2))
            return
        if not page.locks:
            self.stdout.write("No locks held.")
            return
        for held in page.locks:
            who = f"{held.host}:{held.pid} {held.task or held.thread or ''}".strip()
            count = f" x{held.count}" if held.count > 1 else ""
            self.stdout.write(
                f"{held.name}  {held.kind}{count}  fence={held.fence}  "
                f"expires_in={held.expires_in:.1f}s  holder={who}"
                + (f"  waiters={held.waiters}" if held.waiters else "")
            )
        more = ""
        if page.previous_before is not None:
            more += f"; previous page: --before {page.previous_before!r}"
        if page.next_after is not None:
            more += f"; next page: --after {page.next_after!r}"
        self.stdout.write(self.style.SUCCESS(f"{len(page.locks)} of {page.total} held{more}"))
