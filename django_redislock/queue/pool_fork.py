"""How the process-pool supervisor forks a child: pipes, blocked signals, a process group.

Kept apart from the supervisor's loop (:mod:`.supervisor`) because each step here is
about what a child must or must not inherit.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Callable, Iterator
from typing import NoReturn

from django.db import connections

from .pool_child import EXIT_ERROR, STOP_SIGNALS

#: ``child_main(slot, (report_w, life_r), fds_to_close)``: runs in the child, never returns.
ChildMain = Callable[[int, tuple[int, int], list[int]], NoReturn]


@contextlib.contextmanager
def stop_signals_blocked() -> Iterator[None]:
    """Hold SIGTERM/SIGINT while a child is forked and recorded.

    A forked child inherits the mask, so a stop signal sent to it before it installed
    its own handlers waits instead of being lost; in the supervisor, the signal is
    handled once the child is in its list, so the relay reaches it too.
    """
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)


def fork_child(child_main: ChildMain, slot: int, inherited: list[int]) -> tuple[int, int, int]:
    """Fork a child running ``child_main``; returns its pid, report reader and life writer.

    ``inherited`` are the supervisor's descriptors that the child must close (the
    other children's pipes, the wake-up pipe). The supervisor's database connections
    are closed first (a child must never share their sockets) and its buffered output
    is flushed (or the child would print it again). The child gets a process group
    of its own, so a terminal's Ctrl+C reaches only the supervisor.
    """
    report_r, report_w = os.pipe()
    life_r, life_w = os.pipe()
    connections.close_all()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        try:
            os.setpgid(0, 0)
            child_main(slot, (report_w, life_r), [*inherited, report_r, life_w])
        finally:
            os._exit(EXIT_ERROR)
    with contextlib.suppress(OSError):  # the child may have exited already
        os.setpgid(pid, pid)
    os.close(report_w)
    os.close(life_r)
    os.set_blocking(report_r, False)
    return pid, report_r, life_w
