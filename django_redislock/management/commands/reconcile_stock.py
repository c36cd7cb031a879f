"""``manage.py reconcile_stock ITEM [--queue Q] [--fix]``: check a stock's books, fix drift."""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError, CommandParser

from ...exceptions import InvalidArgument, RedisLockError
from ...inventory import Stock
from ._logging import LoggedCommand
from ._queue_common import add_using


class Command(LoggedCommand):
    help = (
        "Check a stock's taken counter and buyers set against its reservation records "
        "(units sold = taken - restored = the reservations' quantities; every buyer holding "
        "a reservation is in the buyers set). --fix sets the counter from the records and "
        "adds missing buyers. Exits 1 when drift was found and not fixed."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("item", help="The stock's item name.")
        parser.add_argument(
            "--queue",
            help="Its order queue (the stock's keys live in that queue's slot); omit for a "
            "stock without an order task.",
        )
        parser.add_argument("--fix", action="store_true", help="Fix the drift found.")
        add_using(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            stock = Stock(options["item"], queue=options["queue"], using=options["using"])
            found = stock.reconcile(fix=options["fix"])
        except (InvalidArgument, RedisLockError) as exc:
            raise CommandError(str(exc)) from exc
        if not found.exists:
            raise CommandError(
                f"stock {found.item!r} was never set (with --queue {options['queue']!r}): "
                "check the item name and its order queue"
            )
        self.stdout.write(
            f"Stock {found.item!r}: {found.remaining} left, {found.taken} taken, "
            f"{found.restored} restored, {found.reserved} units in {found.reservations} live "
            f"reservations, {found.buyers} buyers."
        )
        problems = []
        if found.drift:
            problems.append(f"the taken counter is off by {found.drift:+d}")
        if found.missing_buyers:
            problems.append(f"{found.missing_buyers} buyers missing from the buyers set")
        if found.bad_records:
            problems.append(f"{found.bad_records} unreadable reservation records (not fixed)")
        if not problems:
            self.stdout.write(self.style.SUCCESS("The books agree with the reservations."))
            return
        if found.fixed:
            self.stdout.write(self.style.SUCCESS("Fixed: " + "; ".join(problems) + "."))
            return
        self.stdout.write(self.style.WARNING("Drift: " + "; ".join(problems) + "."))
        if not options["fix"] or found.bad_records:
            raise CommandError("drift found" + ("" if options["fix"] else "; run with --fix"))
