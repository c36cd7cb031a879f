"""``manage.py drain_queue [QUEUE ...]``: run queued ``@task`` calls until stopped."""

from __future__ import annotations

import threading
from typing import Any

from django.core.management.base import CommandError, CommandParser

from ...exceptions import InvalidArgument, RedisLockError
from ...queue.outages import until_reachable
from ...queue.pools import POOLS, check_pool
from ...queue.registry import autodiscover, queues_of
from ...queue.stops import ForcedStop, WorkerGaveUp
from ...queue.worker import Summary, Worker, logger
from ._flow_common import known_queues
from ._logging import LoggedCommand, log_to_stderr
from ._pool import DEFAULT_BATCH, add_pool_arguments, check_pool_options, run_pool
from ._queue_common import add_using, backend_of, queue_of
from .run_scheduler import scheduler_thread


class Command(LoggedCommand):
    help = (
        "Claim tasks and run them, acking or retrying each. --pool thread|async with "
        "--concurrency N runs N tasks at once (claiming only for free slots); a task's "
        "time_limit ends a run that takes too long. SIGTERM/SIGINT finish the running tasks "
        "and give the unstarted ones back at once; a second one stops at once. Rides out "
        "Redis outages (reconnecting with backoff) for up to --give-up seconds. A task whose "
        "module fails to import is retried with backoff; one whose payload cannot be decoded "
        "or names no registered task is dead-lettered. Failures are logged with their "
        "traceback (-v 0: nothing; -v 2: a line per task)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "queues", nargs="*", help="Queue names (default: every known queue of the alias)."
        )
        add_using(parser)
        parser.add_argument("--burst", action="store_true", help="Stop when nothing is due.")
        parser.add_argument("--max-tasks", type=int, default=None, help="Stop after N tasks.")
        parser.add_argument(
            "--batch",
            type=int,
            default=None,
            help="Tasks claimed per round trip (default: 100; with --pool process, "
            "100 / --concurrency per child).",
        )
        parser.add_argument("--timeout", type=float, default=None, help="Stop after S seconds.")
        parser.add_argument(
            "--lease", type=float, default=None, help="Lease per claim (default: the option)."
        )
        parser.add_argument(
            "--give-up",
            type=float,
            default=None,
            help="Exit after Redis was unreachable this many seconds "
            "(default: OPTIONS['WORKER_GIVE_UP'], 300).",
        )
        parser.add_argument(
            "--pool",
            choices=(*POOLS, "process"),
            default=None,
            help="How tasks run: solo (one at a time), thread (--concurrency threads), async "
            "(one event loop, --concurrency in flight) or process (a supervisor that forks "
            "--concurrency worker processes and replaces any that dies) "
            "(default: OPTIONS['WORKER_POOL'], solo).",
        )
        parser.add_argument(
            "--concurrency",
            type=int,
            default=None,
            help="Tasks run at once by the thread or async pool "
            "(default: OPTIONS['WORKER_CONCURRENCY'], 8), or worker processes of the process "
            "pool (default: the number of CPUs).",
        )
        parser.add_argument(
            "--scheduler",
            action="store_true",
            help="Also run the periodic-task scheduler in a thread (see run_scheduler).",
        )
        parser.add_argument(
            "--log-every",
            type=int,
            default=1000,
            help="Log a line every N tasks when not on a terminal (default: %(default)s).",
        )
        add_pool_arguments(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        for name in ("max_tasks", "batch", "log_every", "concurrency"):
            if options[name] is not None and options[name] < 1:
                raise CommandError(f"--{name.replace('_', '-')} must be at least 1")
        for name in ("timeout", "give_up"):
            value = options.get(name)
            if value is not None and not 0 < value < float("inf"):
                raise CommandError(f"--{name.replace('_', '-')} must be a number of seconds > 0")
        check_pool_options(options)
        with log_to_stderr(logger, self.stderr, options["verbosity"]):
            for module, error in autodiscover().items():
                logger.error(
                    "task module %r failed to import (its tasks are retried): %s", module, error
                )
            self.wait_for_redis(options)
            if options["queues"]:
                # A misspelt name would drain nothing and exit 0: refuse it, as pause_queue does.
                known_queues(options["using"], options["queues"])
            if options["pool"] == "process":
                summary = self.run_process_pool(options)
            else:
                worker = self.build_worker(options)
                names = [queue.name for queue in worker.queues]
                self.stdout.write(f"{self.draining(names, options['using'])}; Ctrl+C to stop.")
                with scheduler_thread(options):
                    summary = self.run_worker(worker)
        self.stdout.write(self.style.SUCCESS(self.summary_line(summary)))

    @staticmethod
    def wait_for_redis(options: dict[str, Any]) -> None:
        """Ride out an outage at start as the worker does later, up to ``--give-up`` seconds.

        The queue names are read from Redis before the worker exists; without this a
        worker started a moment before its server would exit at once.
        """
        backend = backend_of(options["using"])
        give_up = options.get("give_up")
        if give_up is None:
            give_up = float(backend.options.get("WORKER_GIVE_UP", 300.0))
        try:
            until_reachable(backend.ping, give_up)
        except WorkerGaveUp as exc:
            raise CommandError(str(exc)) from exc

    def build_worker(self, options: dict[str, Any]) -> Worker:
        alias = options["using"]
        names = options["queues"] or self.known_queues(alias)
        progress = self.progress_reporter(options["log_every"])
        queues = [queue_of(alias, name) for name in names]
        pool, concurrency = options.get("pool"), options.get("concurrency")
        try:
            check_pool(pool or queues[0].backend.options["WORKER_POOL"], concurrency or 1)
        except InvalidArgument as exc:
            raise CommandError(
                f"--concurrency {concurrency} needs --pool thread, async or process"
            ) from exc
        return Worker(
            queues,
            batch=options["batch"] or DEFAULT_BATCH,
            burst=options["burst"],
            max_tasks=options["max_tasks"],
            timeout=options["timeout"],
            lease=options["lease"],
            progress=progress,
            give_up=options.get("give_up"),
            pool=pool,
            concurrency=concurrency,
        )

    def run_process_pool(self, options: dict[str, Any]) -> Summary:
        names = options["queues"] or self.known_queues(options["using"])
        self.stdout.write(f"{self.draining(names, options['using'])} with a process pool.")
        return run_pool(self, names, options)

    @staticmethod
    def draining(names: list[str], alias: str) -> str:
        """``Draining queue orders (alias default)``: which name is a queue, which the alias."""
        label = "queue" if len(names) == 1 else "queues"
        return f"Draining {label} {', '.join(names)} (alias {alias})"

    def known_queues(self, alias: str) -> list[str]:
        try:
            names = set(backend_of(alias).queue_names()) | set(queues_of(alias))
        except RedisLockError as exc:
            raise CommandError(str(exc)) from exc
        return sorted(names) or ["default"]

    def run_worker(self, worker: Worker) -> Summary:
        try:
            if threading.current_thread() is threading.main_thread():
                with worker.signal_handlers():
                    return worker.run()
            return worker.run()
        except RedisLockError as exc:
            raise CommandError(str(exc)) from exc
        except ForcedStop as exc:
            raise CommandError(
                f"{exc}: the running task was interrupted; its claim comes back when its lease ends"
            ) from exc
        finally:
            self.close_progress()

    def progress_reporter(self, every: int) -> Any:
        self._bar: Any = None
        if self.stdout.isatty():
            from tqdm import tqdm

            self._bar = tqdm(unit="task", file=self.stdout._out, dynamic_ncols=True)
            shown = [0]

            def advance(summary: Summary) -> None:
                self._bar.update(summary.processed - shown[0])
                shown[0] = summary.processed

            return advance

        def log(summary: Summary) -> None:
            if summary.processed % every == 0:
                self.stdout.write(self.summary_line(summary, running=True))

        return log

    def close_progress(self) -> None:
        if self._bar is not None:
            self._bar.close()

    @staticmethod
    def summary_line(summary: Summary, running: bool = False) -> str:
        summary.elapsed = summary.elapsed if not running else summary.elapsed_now()
        return (
            f"processed {summary.processed}, failed {summary.failed}, retried {summary.retried}, "
            f"dead {summary.dead}, released {summary.released} in {summary.elapsed:.1f}s "
            f"({summary.rate:,.0f} tasks/s)"
        )
