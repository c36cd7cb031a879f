"""Show a logger of this app on a command's stderr, by ``--verbosity``."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import Any

from django.core.management.base import BaseCommand, OutputWrapper

#: ``--verbosity`` -> the lowest level shown on stderr (0: nothing).
LEVELS = {1: logging.WARNING, 2: logging.INFO, 3: logging.DEBUG}


@contextlib.contextmanager
def log_to_stderr(logger: logging.Logger, stderr: OutputWrapper, verbosity: int) -> Iterator[None]:
    """Show ``logger``'s records on the command's stderr while the block runs.

    ``-v 0`` shows nothing, ``-v 1`` warnings and errors (a failed task with its
    traceback), ``-v 2`` also INFO (a line per task or tick), ``-v 3`` DEBUG. When
    the project's ``LOGGING`` already gives the logger (or a parent) a handler, that
    configuration decides and nothing is added.
    """
    if logger.hasHandlers():
        yield
        return
    level = LEVELS.get(min(verbosity, 3), logging.CRITICAL + 1)
    handler: logging.Handler = logging.NullHandler()  # -v 0: not even logging's last resort
    if verbosity > 0:
        handler = logging.StreamHandler(stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    handler.setLevel(level)
    previous = logger.level
    if previous == logging.NOTSET or previous > level:
        logger.setLevel(level)
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(previous)


#: The root of this app's loggers: every command shows it by ``--verbosity``.
APP_LOGGER = logging.getLogger("django_redislock")


class LoggedCommand(BaseCommand):
    """A command whose run shows the ``django_redislock`` logger tree by ``--verbosity``.

    ``-v 0`` keeps the tree quiet, ``-v 1`` shows warnings and errors, ``-v 2`` INFO and
    ``-v 3`` DEBUG, unless the project's ``LOGGING`` configures the tree itself.
    """

    def execute(self, *args: Any, **options: Any) -> str | None:
        verbosity = int(options.get("verbosity", 1))
        stderr = options.get("stderr")
        out = OutputWrapper(stderr) if stderr is not None else self.stderr
        with log_to_stderr(APP_LOGGER, out, verbosity):
            result: str | None = super().execute(*args, **options)
            return result
