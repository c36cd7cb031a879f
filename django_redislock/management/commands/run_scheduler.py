"""``manage.py run_scheduler``: enqueue the ticks of every periodic task until stopped."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import (
    CommandError,
    CommandParser,
)

from ...exceptions import RedisLockError
from ...periodic.scheduler import Scheduler, logger
from ...queue.registry import autodiscover
from ._logging import LoggedCommand, log_to_stderr
from ._queue_common import add_using


def build_scheduler(using: str, lock_using: str) -> Scheduler:
    """A scheduler of every periodic task (task modules imported first); CommandError if bad."""
    autodiscover()
    try:
        return Scheduler(using=using, lock_using=lock_using)
    except (RedisLockError, ImproperlyConfigured, TypeError) as exc:
        raise CommandError(f"cannot start the scheduler: {exc}") from exc


@contextlib.contextmanager
def scheduler_thread(options: dict[str, Any]) -> Iterator[None]:
    """With ``--scheduler``, run a scheduler beside ``drain_queue``'s worker, then stop it."""
    if not options.get("scheduler"):
        yield
        return
    scheduler = build_scheduler(options["using"], "default")
    thread = scheduler.start_thread()
    try:
        yield
    finally:
        scheduler.stop()
        thread.join()


@contextlib.contextmanager
def stop_on_signals(scheduler: Scheduler) -> Iterator[None]:
    """SIGTERM/SIGINT stop the scheduler (it releases its lock); the old handlers come back."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {signum: signal.getsignal(signum) for signum in (signal.SIGTERM, signal.SIGINT)}
    for signum in previous:
        signal.signal(signum, lambda *_: scheduler.stop())
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


class Command(LoggedCommand):
    help = (
        "Enqueue each tick of every @periodic_task and REDISLOCK_PERIODIC_TASKS entry exactly "
        "once. Run as many as you like: one leads (holding a lock), the others stand by and "
        "take over within the lock's ttl if it dies. SIGTERM/SIGINT stop it."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        add_using(parser)
        parser.add_argument(
            "--lock-using",
            default="default",
            help="The REDISLOCK_LOCKS alias of the leader lock (default: %(default)s).",
        )
        parser.add_argument("--timeout", type=float, default=None, help="Stop after S seconds.")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["timeout"] is not None and options["timeout"] <= 0:
            raise CommandError("--timeout must be > 0")
        with log_to_stderr(logger, self.stderr, options["verbosity"]):
            scheduler = build_scheduler(options["using"], options["lock_using"])
            names = ", ".join(entry.schedule.name for entry in scheduler.entries) or "none"
            self.stdout.write(f"Scheduling {names} ({options['using']}); Ctrl+C to stop.")
            self.stdout.flush()
            with stop_on_signals(scheduler):
                stats = scheduler.run(timeout=options["timeout"])
        self.stdout.write(
            self.style.SUCCESS(
                f"queued {stats.queued} tick(s), {stats.already} already queued, "
                f"{stats.skipped} skipped as missed"
            )
        )
