"""A command whose ``handle`` is guarded by ``@distributed_lock`` (decorator tests)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from django_redislock import distributed_lock


class Command(BaseCommand):
    help = "Print the report's name while holding the report:<name> lock."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("report")

    @distributed_lock("report:{report}", ttl=5, timeout=0, on_locked="skip")
    def handle(self, *args: Any, **options: Any) -> None:
        self.stdout.write(f"built {options['report']}")
